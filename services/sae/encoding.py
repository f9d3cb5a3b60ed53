"""Documents → sparse codes: each row's top-k (feature, activation) pairs as scipy.sparse."""

from __future__ import annotations

import io

import numpy as np
import scipy.sparse as sp
import torch

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.sae import FeatureActivation
from contracts.sparse import max_pool_rows  # noqa: F401 - re-exported: tests/sae and bench/status.py import it from here
from services.sae.model import TopKSae


@torch.no_grad()
def encode_all(sae: TopKSae, x: np.ndarray, batch_size: int = 4096) -> sp.csr_matrix:
    """x: float32 [N, d] → CSR float32 [N, n] with at most k non-zeros a row (zeros dropped)."""
    n_docs = x.shape[0]
    indices = np.empty((n_docs, sae.k), dtype=np.int32)
    data = np.empty((n_docs, sae.k), dtype=np.float32)
    for start in range(0, n_docs, batch_size):
        xb = torch.from_numpy(np.ascontiguousarray(x[start:start + batch_size], dtype=np.float32))
        acts, idx = sae.encode(xb.to(sae.device))  # [b, k] each
        indices[start:start + len(xb)] = idx.cpu().numpy()
        data[start:start + len(xb)] = acts.cpu().numpy()
    indptr = np.arange(0, n_docs * sae.k + 1, sae.k, dtype=np.int64)
    codes = sp.csr_matrix((data.reshape(-1), indices.reshape(-1), indptr),
                          shape=(n_docs, sae.num_latents))
    codes.eliminate_zeros()
    codes.sort_indices()
    return codes


def _npz_bytes(matrix: sp.spmatrix) -> bytes:
    buf = io.BytesIO()
    sp.save_npz(buf, matrix, compressed=False)
    return buf.getvalue()


def save_sparse(store: ArtifactStore, key: str, matrix: sp.spmatrix, kind: str) -> ArtifactInfo:
    """One scipy.sparse matrix as an npz artifact (`scipy.sparse.load_npz` reads it)."""
    return store.write_bytes(key, _npz_bytes(matrix), kind=kind)


def load_sparse(store: ArtifactStore, uri_or_key: str) -> sp.spmatrix:
    return sp.load_npz(io.BytesIO(store.read_bytes(uri_or_key)))


def save_codes(store: ArtifactStore, prefix: str, codes: sp.csr_matrix) -> tuple[ArtifactInfo, ArtifactInfo]:
    """`<prefix>/codes.csr.npz` (rows: documents) and `<prefix>/codes.csc.npz` (columns: features)."""
    csr = save_sparse(store, f"{prefix}/codes.csr.npz", codes, "sae-codes")
    csc = save_sparse(store, f"{prefix}/codes.csc.npz", codes.tocsc(), "sae-codes")
    return csr, csc


@torch.no_grad()
def encode_vectors(sae: TopKSae, vectors: np.ndarray) -> list[list[FeatureActivation]]:
    """[m, d] query vectors → per vector its non-zero latents, strongest first."""
    acts, idx = sae.encode(torch.as_tensor(vectors, dtype=torch.float32, device=sae.device))
    order = torch.argsort(acts, dim=1, descending=True)
    acts, idx = acts.gather(1, order).cpu(), idx.gather(1, order).cpu()
    return [
        [FeatureActivation(index=int(i), activation=float(a)) for a, i in zip(ra, ri) if a > 0]
        for ra, ri in zip(acts.tolist(), idx.tolist())
    ]
