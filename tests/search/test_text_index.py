"""FAISS text index: exact results for flat, high recall for HNSW and IVF, the kind chosen by the
setting, built once from the run's shards, catalogued, and found again instead of rebuilt."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gateway.db import session_scope
from gateway.domain.artifacts import repo as artifact_repo
from gateway.search import text_index
from tests.factories import add_stub_dataset, add_succeeded_embedding_run, write_vector_shards

pytestmark = pytest.mark.anyio


def unit_vectors(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_flat_is_exact_and_approximate_kinds_recall() -> None:
    docs, queries = unit_vectors(3000, 32, 0), unit_vectors(20, 32, 1)
    truth = np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :10]
    for kind, min_recall in [("flat", 1.0), ("hnsw", 0.9), ("ivf", 0.6)]:
        index = text_index.build_index(docs.copy(), kind)
        found = [text_index.search(index, q * 3.0, 10) for q in queries]  # any norm: queries are normalised
        recall = np.mean([len(set(f.positions.tolist()) & set(t.tolist())) / 10 for f, t in zip(found, truth)])
        assert recall >= min_recall, (kind, recall)
        assert all(np.all(np.diff(f.scores) <= 1e-6) for f in found)  # nearest first
    flat = text_index.build_index(docs.copy(), "flat")
    hit = text_index.search(flat, docs[7], 3)
    assert hit.positions[0] == 7 and hit.scores[0] == pytest.approx(1.0, abs=1e-5)


def test_kind_follows_the_setting() -> None:
    assert text_index.choose_kind(999, flat_max_docs=1000, large="hnsw") == "flat"
    assert text_index.choose_kind(1001, flat_max_docs=1000, large="hnsw") == "hnsw"
    assert text_index.choose_kind(1001, flat_max_docs=1000, large="ivf") == "ivf"


def _embedding_run(app, vectors: np.ndarray, shard_size: int) -> int:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        ds = add_stub_dataset(session, name="v", n_documents=len(vectors))
        run = add_succeeded_embedding_run(session, dataset_id=ds.id, dim=vectors.shape[1], n_documents=len(vectors))
        write_vector_shards(app.state.store, run, vectors, shard_size=shard_size)
        return run.id


@pytest.mark.parametrize("flat_max_docs", [10_000, 100])
def test_ensure_index_builds_once_from_the_shards(app, flat_max_docs: int) -> None:  # noqa: ANN001
    vectors = unit_vectors(500, 16, 2) * 2.5  # stored vectors need not be unit: the index normalises
    run_id = _embedding_run(app, vectors, shard_size=128)
    uri = text_index.ensure_index(app.state.factory, app.state.store, run_id, flat_max_docs=flat_max_docs, large="hnsw")
    kind = "flat" if flat_max_docs > 500 else "hnsw"
    assert uri.endswith(f"embedding-runs/{run_id}/search/{kind}.faiss")
    with session_scope(app.state.factory) as session:
        arts = artifact_repo.for_owner(session, owner_type="embedding_run", owner_id=run_id)
    assert [a.kind for a in arts] == ["faiss-index"] and arts[0].uri == uri
    index = text_index.load_index(app.state.store, uri)
    assert index.ntotal == 500 and text_index.search(index, vectors[321], 1).positions.tolist() == [321]
    before = os.stat(app.state.store.local_path(uri)).st_mtime_ns
    again = text_index.ensure_index(app.state.factory, app.state.store, run_id, flat_max_docs=flat_max_docs,
                                    large="hnsw")
    assert again == uri and os.stat(app.state.store.local_path(uri)).st_mtime_ns == before  # not rebuilt


def test_a_run_without_vectors_is_refused(app) -> None:  # noqa: ANN001
    run_id = _embedding_run(app, np.zeros((0, 4), np.float32), shard_size=10)
    with pytest.raises(LookupError, match="no vectors"):
        text_index.ensure_index(app.state.factory, app.state.store, run_id, flat_max_docs=10, large="hnsw")
