"""The TopK SAE's encoder in numpy, read from the SAE folder (sparsify's layout).

h = TopK(ReLU(W_e (x - b_d) + b_e)), as services/sae/model.py; reimplemented here because
services share contracts, not code (and this keeps torch out of the interpreter). A test
checks it against the SAE service's `load_sae(...).encode`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from safetensors.numpy import load as st_load

from artifacts import ArtifactStore


@dataclass(frozen=True)
class SaeEncoder:
    w_enc: np.ndarray
    """float32 [n, d] (`encoder.weight`)."""
    b_enc: np.ndarray
    """float32 [n]"""
    b_dec: np.ndarray
    """float32 [d]"""
    k: int

    @classmethod
    def load(cls, store: ArtifactStore, prefix_or_uri: str) -> SaeEncoder:
        base = prefix_or_uri.rstrip("/")
        cfg = json.loads(store.read_bytes(f"{base}/cfg.json"))
        if cfg.get("activation", "topk") != "topk":
            raise ValueError(f"unsupported SAE activation {cfg.get('activation')!r}")
        t = st_load(store.read_bytes(f"{base}/sae.safetensors"))
        return cls(t["encoder.weight"].astype(np.float32), t["encoder.bias"].astype(np.float32),
                   t["b_dec"].astype(np.float32), int(cfg["k"]))

    def encode(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x: [B, d] → (activations, indices), each [B, k], activations ≥ 0."""
        pre = (np.asarray(x, np.float32) - self.b_dec) @ self.w_enc.T + self.b_enc  # [B, n]
        idx = np.argpartition(-pre, self.k - 1, axis=1)[:, : self.k]  # [B, k]
        return np.maximum(np.take_along_axis(pre, idx, 1), 0.0), idx

    def feature_activation(self, x: np.ndarray, feature: int) -> np.ndarray:
        """[B] activation of `feature` for each row of x (0 where it is not in the row's top k)."""
        acts, idx = self.encode(x)
        return np.where(idx == feature, acts, 0.0).sum(1)

    def feature_preactivation(self, x: np.ndarray, feature: int) -> np.ndarray:
        """[B] W_e[feature] · (x - b_d) + b_e[feature]: ranks rows even where the top-k drops it."""
        return (np.asarray(x, np.float32) - self.b_dec) @ self.w_enc[feature] + self.b_enc[feature]
