"""Sparse codes, as the SAE service and the gateway both compute on them (shared here because
the gateway reaches services only through `contracts` and their clients)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def max_pool_rows(rows: sp.csr_matrix, owner: np.ndarray, n_out: int, block_nnz: int = 1 << 22) -> sp.csr_matrix:
    """Row-wise max of the rows that share an owner: rows [R, n] CSR with non-negative values,
    owner int [R] non-decreasing in [0, n_out) → CSR float32 [n_out, n] (an owner without rows is
    an empty row). Sparse throughout: owners are taken in blocks of about `block_nnz` non-zeros,
    each block's (owner, feature) keys sorted and reduced by `np.maximum.reduceat`, so memory is
    O(block) beyond the input and output (3M segment rows × 32 non-zeros: 96M entries)."""
    owner = np.asarray(owner, dtype=np.int64)
    if owner.shape != (rows.shape[0],):
        raise ValueError(f"owner has shape {owner.shape}, rows {rows.shape}")
    if len(owner) and (np.any(np.diff(owner) < 0) or owner[0] < 0 or owner[-1] >= n_out):
        raise ValueError("owner must be non-decreasing and within [0, n_out)")
    if rows.nnz and rows.data.min() < 0:
        raise ValueError("max_pool_rows needs non-negative values (an implicit zero would win the max)")
    rows = rows.tocsr()
    n = rows.shape[1]
    first_row = np.searchsorted(owner, np.arange(n_out + 1))  # [n_out + 1]: owner o has rows [f[o], f[o+1])
    nnz_at = rows.indptr[first_row].astype(np.int64)  # [n_out + 1]: owner o's entries [nnz_at[o], nnz_at[o+1])
    cuts = np.unique(np.concatenate([[0], np.searchsorted(nnz_at, np.arange(block_nnz, nnz_at[-1], block_nnz)),
                                     [n_out]]))
    counts, indices, data = np.zeros(n_out, dtype=np.int64), [], []
    for o0, o1 in zip(cuts[:-1], cuts[1:]):
        lo, hi = nnz_at[o0], nnz_at[o1]
        local = np.repeat(np.arange(o1 - o0, dtype=np.int64), np.diff(nnz_at[o0:o1 + 1]))  # [hi - lo]
        key = local * n + rows.indices[lo:hi]
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        if len(starts):
            data.append(np.maximum.reduceat(rows.data[lo:hi][order], starts).astype(np.float32))
            indices.append((key[starts] % n).astype(np.int32))
            counts[o0:o1] = np.bincount(key[starts] // n, minlength=o1 - o0)
    indptr = np.zeros(n_out + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    out = sp.csr_matrix((np.concatenate(data) if data else np.zeros(0, np.float32),
                         np.concatenate(indices) if indices else np.zeros(0, np.int32), indptr), shape=(n_out, n))
    out.eliminate_zeros()
    return out
