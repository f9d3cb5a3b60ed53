"""Fixtures of the embedder tests: the default model (fp32, CPU) loaded once, snapshots, stores."""

from __future__ import annotations

import io
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from services.embedder.config import EmbedderSettings
from services.embedder.models import LoadedModel, ModelCache

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One torch thread: tiny batches gain nothing from more, and a busy shared CPU makes
    OpenMP barriers spin (a 20-token forward pass took 0.25 s with 2 threads, 0.03 s with 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def settings() -> EmbedderSettings:
    """fp32 on CPU so results compare with the naive reference and sentence-transformers."""
    return EmbedderSettings(device="cpu", precision="fp32", threads=1,
                            progress_interval_s=0.0, max_texts=8, max_chars=2000)


@pytest.fixture(scope="session")
def models(settings: EmbedderSettings) -> ModelCache:
    return ModelCache.from_settings(settings)


@pytest.fixture(scope="session")
def lm(models: ModelCache) -> LoadedModel:
    return models.get(None)


@pytest.fixture
def store(tmp_path) -> ArtifactStore:
    return ArtifactStore(str(tmp_path / "artifacts"))


@pytest.fixture
def snapshot(store: ArtifactStore):
    """`snapshot(texts, key=...)` writes a dataset snapshot into the test's store."""
    def make(texts: list[str], key: str = "datasets/1/snapshot.parquet") -> ArtifactInfo:
        return write_snapshot(store, key, texts)
    return make


@pytest.fixture
def make_corpus():
    return corpus


def write_snapshot(store: ArtifactStore, key: str, texts: list[str], *, row_group_size: int = 5) -> ArtifactInfo:
    """A dataset snapshot as the gateway writes it (Parquet), in several row groups."""
    n = len(texts)
    table = pa.table({
        "position": pa.array(range(n), pa.int64()),
        "doc_id": pa.array(range(100, 100 + n), pa.int64()),
        "external_id": pa.array([None] * n, pa.string()),
        "text": pa.array(texts, pa.string()),
        "labels": pa.array([[] for _ in range(n)], pa.list_(pa.string())),
        "metadata": pa.array(["{}"] * n, pa.string()),
    })
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group_size)
    return store.write_bytes(key, buf.getvalue(), kind="snapshot")


def corpus(n: int) -> list[str]:
    """Seeded documents of varied length: empty, a few words, several 16-token windows."""
    words = ["fever", "cough", "infant", "bronchiolitis", "suspected", "confirmed", "wheezing", "oxygen", "saturation", "nebulised", "salbutamol", "discharged", "home", "follow-up", "clinic"]
    out = []
    for i in range(n):
        size = (i * 7) % 53
        out.append(" ".join(words[(i + j * 3) % len(words)] for j in range(size)))
    return out


def stored_array(store: ArtifactStore, infos: list[ArtifactInfo], name: str | None = None) -> np.ndarray:
    """A run's stored arrays (.npy shards, or the array `name` of .npz ones) concatenated in order."""
    parts = []
    for info in infos:
        data = io.BytesIO(store.read_bytes(info.uri))
        if name is None:
            parts.append(np.load(data))
        else:
            with np.load(data) as z:
                parts.append(z[name])
    return np.concatenate(parts)
