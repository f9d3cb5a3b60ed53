"""SAE weights and checkpoints in the artifact store, in EleutherAI sparsify's layout.

A trained SAE is a folder with `cfg.json` (sparsify's `SparseCoderConfig` fields plus
`d_in`, and a `prisma` block with our `SaeConfig`) and `sae.safetensors` (`encoder.weight`,
`encoder.bias`, `W_dec`, `b_dec`). sparsify ignores the extra block; we accept any folder
sparsify writes for a plain TopK autoencoder.

A checkpoint is `checkpoint/step-XXXXXXXX/{state.safetensors, state.json}`, made current by
rewriting `checkpoint/latest.json` last, so a kill at any moment leaves a complete one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.sae import SaeConfig
from services.sae.model import TopKSae

WEIGHT_KEYS = ("encoder.weight", "encoder.bias", "W_dec", "b_dec")


class SavedSae(NamedTuple):
    cfg: ArtifactInfo
    weights: ArtifactInfo


def sae_cfg_dict(sae: TopKSae, config: SaeConfig | None) -> dict[str, Any]:
    """cfg.json: sparsify's fields (so `SparseCoder.load_from_disk` reads it) + ours."""
    out: dict[str, Any] = {
        "activation": "topk", "expansion_factor": sae.num_latents // sae.d, "normalize_decoder": True,
        "num_latents": sae.num_latents, "k": sae.k, "multi_topk": False, "skip_connection": False,
        "transcode": False, "d_in": sae.d,
    }
    if config is not None:
        out["prisma"] = config.model_dump(mode="json")
    return out


def save_sae(store: ArtifactStore, prefix: str, sae: TopKSae, config: SaeConfig | None) -> SavedSae:
    """Write `<prefix>/cfg.json` and `<prefix>/sae.safetensors`."""
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in sae.state_dict().items()}
    weights = store.write_bytes(f"{prefix}/sae.safetensors", st_save(tensors), kind="sae")
    cfg = store.write_bytes(f"{prefix}/cfg.json", json.dumps(sae_cfg_dict(sae, config)).encode(),
                            kind="sae-config")
    return SavedSae(cfg, weights)


def sae_from_parts(cfg: dict[str, Any], tensors: dict[str, torch.Tensor],
                   device: str | torch.device = "cpu") -> TopKSae:
    """Build a TopKSae from a cfg.json dict and its tensors; rejects what we cannot run."""
    for key, want in (("activation", "topk"), ("transcode", False), ("skip_connection", False)):
        if cfg.get(key, want) != want:
            raise ValueError(f"unsupported SAE: {key} = {cfg.get(key)!r} (need {want!r})")
    missing = [k for k in WEIGHT_KEYS if k not in tensors]
    if missing:
        raise ValueError(f"sae.safetensors lacks {missing}")
    n, d = tensors["W_dec"].shape
    if int(cfg["d_in"]) != d:
        raise ValueError(f"cfg.json d_in = {cfg['d_in']} but W_dec has d = {d}")
    sae = TopKSae(d, n, int(cfg["k"]), device=device)
    sae.load_state_dict({k: tensors[k].to(torch.float32) for k in WEIGHT_KEYS})
    return sae


def load_sae(store: ArtifactStore, prefix_or_uri: str, device: str | torch.device = "cpu") -> TopKSae:
    """Load the SAE in the store folder `prefix_or_uri` (a key prefix or its URI)."""
    base = prefix_or_uri.rstrip("/")
    cfg = json.loads(store.read_bytes(f"{base}/cfg.json"))
    return sae_from_parts(cfg, st_load(store.read_bytes(f"{base}/sae.safetensors")), device)


def import_sae(store: ArtifactStore, folder: str | Path, prefix: str) -> SavedSae:
    """Copy an SAE trained elsewhere (a local sparsify folder) into the store, after checking it."""
    folder = Path(folder)
    cfg = json.loads((folder / "cfg.json").read_text())
    tensors = st_load((folder / "sae.safetensors").read_bytes())
    sae = sae_from_parts(cfg, tensors)
    return save_sae(store, prefix, sae, None)


# -- checkpoints ----------------------------------------------------------------------------
def save_checkpoint(store: ArtifactStore, prefix: str, step: int,
                    tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Write the state of `step`, then point `latest.json` at it, then drop older states."""
    folder = f"{prefix}/checkpoint/step-{step:08d}"
    store.write_bytes(f"{folder}/state.safetensors",
                      st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}))
    store.write_bytes(f"{folder}/state.json", json.dumps({**meta, "step": step}).encode())
    store.write_bytes(f"{prefix}/checkpoint/latest.json", json.dumps({"folder": folder}).encode())
    for key in store.list(f"{prefix}/checkpoint"):
        if key.rsplit("/", 2)[-2].startswith("step-") and not key.startswith(folder + "/"):
            store.delete(key)


def load_checkpoint(store: ArtifactStore, prefix: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    """The latest complete checkpoint under `prefix`, or None."""
    latest = f"{prefix}/checkpoint/latest.json"
    if not store.exists(latest):
        return None
    folder = json.loads(store.read_bytes(latest))["folder"]
    tensors = st_load(store.read_bytes(f"{folder}/state.safetensors"))
    return tensors, json.loads(store.read_bytes(f"{folder}/state.json"))
