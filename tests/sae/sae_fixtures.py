"""Shared test data for the SAE tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import io

import numpy as np

from artifacts import ArtifactStore
from contracts.sae import SaeConfig, SaeTrainPayload


def tiny_payload(store: ArtifactStore, **cfg) -> SaeTrainPayload:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((300, 12)) @ rng.standard_normal((12, 12))).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, x)
    info = store.write_bytes("emb/0.npy", buf.getvalue())
    config = SaeConfig(**{"expansion_factor": 4, "k": 3, "batch_size": 32, "max_steps": 60,
                          "checkpoint_every_steps": 10, "dead_after_samples": 64, **cfg})
    return SaeTrainPayload(run_id=7, embeddings=[info], artifact_prefix="sae/7", config=config)
