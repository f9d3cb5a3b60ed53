"""A worker killed with SIGKILL mid-shard resumes: same vectors, at most the shard in flight recomputed."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from artifacts import ArtifactStore
from contracts.embed import EmbeddingRunSpec, EmbedJobPayload, EmbedJobResult
from services.embedder.config import EmbedderSettings
from services.embedder.models import ModelCache
from services.embedder.runs import run_embedding

CHILD = Path(__file__).with_name("run_child.py")
REPO = Path(__file__).resolve().parents[2]


def start_child(root: str, payload: EmbedJobPayload, hang_at: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(
        [sys.executable, str(CHILD), root, payload.model_dump_json(), str(hang_at)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO,
    )


def read_vectors(store: ArtifactStore, result: EmbedJobResult) -> tuple[np.ndarray, np.ndarray]:
    docs = np.concatenate([np.load(io.BytesIO(store.read_bytes(s.uri))) for s in result.shards])
    chunks = np.concatenate([np.load(io.BytesIO(store.read_bytes(s.uri)))["vectors"] for s in result.chunks])
    return docs, chunks


@pytest.mark.slow
def test_sigkill_mid_shard_then_resume_equals_uninterrupted(
    store: ArtifactStore, snapshot, make_corpus, settings: EmbedderSettings, models: ModelCache
) -> None:
    snap = snapshot(make_corpus(30))
    spec = EmbeddingRunSpec(max_length=18, shard_size=6, batch_tokens=60)  # 5 shards, several batches each
    payload = EmbedJobPayload(run_id=1, snapshot_uri=snap.uri, artifact_prefix="embedding-runs/1", spec=spec)

    child = start_child(store.root, payload, hang_at=2)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "IN FLIGHT"
        finished_before_kill = store.list("embedding-runs/1/embeddings")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert len(finished_before_kill) == 2, finished_before_kill
    assert store.list("embedding-runs/1/embeddings") == finished_before_kill, "shard 2 was in flight"
    # a killed writer's leftover beside the shard in flight must be ignored
    store.fs.pipe(store.local_path("embedding-runs/1/embeddings/shard-00002.npy") + ".tmp-0123abcd", b"half")

    # the restarted worker (here in-process, one thread like the child) resumes
    resumed = run_embedding(payload, store, settings=settings, models=models)
    assert (resumed.shards_reused, resumed.shards_computed) == (2, 3), "only the shard in flight is redone"

    clean_payload = payload.model_copy(update={"artifact_prefix": "embedding-runs/2"})
    clean = run_embedding(clean_payload, store, settings=settings, models=models)
    assert clean.shards_computed == 5
    resumed_docs, resumed_chunks = read_vectors(store, resumed)
    clean_docs, clean_chunks = read_vectors(store, clean)
    assert np.array_equal(resumed_docs, clean_docs), "bit for bit"
    assert np.array_equal(resumed_chunks, clean_chunks)
    assert [s.sha256 for s in resumed.shards] == [s.sha256 for s in clean.shards]
