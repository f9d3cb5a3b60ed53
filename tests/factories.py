"""Rows and artifacts of finished runs without computing them, written the way the jobs record them:
a dataset of the default project, a succeeded embedding run (with its vector shards when given), a
succeeded SAE run (with its codes CSC npz and one feature row a latent when given, and its segment
codes when given). Used by tests and
by bench/security.py; each function works in the caller's session and leaves the commit to it."""

from __future__ import annotations

import io

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from artifacts import ArtifactStore
from gateway.domain.auth.accounts import default_project
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.datasets.models import Dataset
from gateway.domain.features import repo as feature_repo
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from gateway.search.space import SEGMENT_CODES_ARTIFACT, SEGMENTS_ARTIFACT


def add_stub_dataset(session: Session, *, name: str, n_documents: int) -> Dataset:
    """A CSV dataset row of the default project, without documents."""
    return dataset_repo.add_dataset(session, name=name, format="csv", n_documents=n_documents,
                                    project_id=default_project(session).id)


def add_succeeded_embedding_run(session: Session, *, dataset_id: int, dim: int, n_documents: int) -> EmbeddingRun:
    """A succeeded run of the default model, without shards (see `write_vector_shards`)."""
    return run_repo.add_embedding_run(session, dataset_id=dataset_id, model="default", status="succeeded", dim=dim,
                                      n_documents=n_documents, result={"shards": []})


def write_vector_shards(store: ArtifactStore, run: EmbeddingRun, vectors: np.ndarray, *, shard_size: int) -> None:
    """`vectors` [docs, dim] as the run's .npy shards of `shard_size` rows each."""
    shards = []
    for i, start in enumerate(range(0, len(vectors), shard_size)):
        buf = io.BytesIO()
        np.save(buf, vectors[start:start + shard_size])
        shards.append(store.write_bytes(f"embedding-runs/{run.id}/emb-{i:05d}.npy", buf.getvalue(),
                                        kind="embeddings").model_dump())
    run.result = {"shards": shards}


def add_succeeded_sae_run(session: Session, *, embedding_run_id: int, d: int, n_latents: int, k: int) -> SaeRun:
    """A succeeded SAE run, without artifacts or features (see `write_codes`)."""
    run = SaeRun(embedding_run_id=embedding_run_id, status="succeeded", d=d, n_latents=n_latents, k=k)
    session.add(run)
    session.flush()
    return run


def write_codes(session: Session, store: ArtifactStore, run: SaeRun, codes: sp.spmatrix, *,
                density: float | None = None) -> None:
    """`codes` [docs, latents] as the run's codes CSC artifact, and a feature row a latent whose density
    is `density`, or by default the latent's share of documents with a non-zero code."""
    codes = sp.csc_matrix(codes)
    buf = io.BytesIO()
    sp.save_npz(buf, codes, compressed=False)
    info = store.write_bytes(f"sae-runs/{run.id}/codes.csc.npz", buf.getvalue(), kind="sae-codes")
    run.result = {"artifacts": {"codes_csc": info.model_dump()}}
    n_docs = codes.shape[0]
    feature_repo.replace_features(session, sae_run_id=run.id, rows=[
        {"sae_run_id": run.id, "index": i, "density": float(codes[:, i].nnz / n_docs) if density is None else density,
         "histogram": {}, "neighbours": {}} for i in range(codes.shape[1])])


def add_coded_sae_run(session: Session, store: ArtifactStore, *, dataset_id: int, codes: sp.spmatrix,
                      density: float | None = None) -> SaeRun:
    """A searchable SAE run over the dataset: an embedding run of dim 4 (no shards), an SAE run with
    d = k = 4 and one latent a column of `codes` [docs, latents], its codes artifact and features."""
    n_docs, n_latents = codes.shape
    emb = add_succeeded_embedding_run(session, dataset_id=dataset_id, dim=4, n_documents=n_docs)
    run = add_succeeded_sae_run(session, embedding_run_id=emb.id, d=4, n_latents=n_latents, k=4)
    write_codes(session, store, run, codes, density=density)
    return run


def write_segment_codes(store: ArtifactStore, run: SaeRun, codes: sp.spmatrix, position: np.ndarray,
                        spans: np.ndarray) -> None:
    """`codes` [segments, latents] as the run's segment codes CSR npz and `position`, `spans`
    [segments, 2] as its segments index, both listed in the run's result (as the SAE job does)."""
    codes_buf, index_buf = io.BytesIO(), io.BytesIO()
    sp.save_npz(codes_buf, sp.csr_matrix(codes), compressed=False)
    np.savez(index_buf, position=position, char_start=spans[:, 0], char_end=spans[:, 1])
    info = store.write_bytes(f"sae-runs/{run.id}/segment_codes.csr.npz", codes_buf.getvalue(), kind="sae-codes")
    index = store.write_bytes(f"sae-runs/{run.id}/segments.npz", index_buf.getvalue(), kind="sae-segments")
    run.result = {"artifacts": {**run.result["artifacts"], SEGMENT_CODES_ARTIFACT: info.model_dump(),
                                SEGMENTS_ARTIFACT: index.model_dump()}}


def unit_vectors(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Seeded Gaussian vectors scaled to unit norm, float32 [n, d]: vectors for a test that needs no meaning in them."""
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def npy(array: np.ndarray) -> bytes:
    """`array` as the bytes of an .npy file (what an embedding import's `file` takes)."""
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()
