"""Feature statistics from the sparse codes, never a dense [docs, n] or [n, n] matrix.

A = 1[codes > 0] and B = codes are [N, n] CSR with ≤ k non-zeros a row (more where a document's codes
are the max over its segments). Per feature: the
count f_i = Σ_d A[d, i] (documents where i fires), density f_i / N, mean and max activation
while firing, a histogram. Pairwise: C = AᵀA (co-occurrence counts), D = BᵀB (activation
similarity), C_norm[i, j] = C[i, j] / (f_i + ε) = P(j fires | i fires), computed for blocks
of latents at a time; top-m neighbours by C_norm and by decoder cosine (chunked W_d W_dᵀ).
Where the codes are dense enough that scipy's sparse product costs more than a dense one (documents
max-pooled over ~36 clauses hold ~700 of 3,072 features), a block of C and D is a dense BLAS product
over chunks of rows ([block, n] accumulators, never [N, n]), kept sparse with the same pattern.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

from contracts.sae import StatsConfig


class FeatureSummary(NamedTuple):
    counts: np.ndarray
    """[n] int64 documents in which each feature fires (f_i, the diagonal of C)."""
    density: np.ndarray
    """[n] float64 counts / N."""
    mean_activation: np.ndarray
    """[n] float32 mean activation over the documents where the feature fires (0 if none)."""
    max_activation: np.ndarray
    """[n] float32."""
    histogram: np.ndarray
    """[n, bins] int64 counts of activations in bins of [0, max_activation] (equal widths)."""


class Pairwise(NamedTuple):
    cooccurrence: sp.csr_matrix
    """[n, n] float32 C = AᵀA, pairs pruned by StatsConfig.store_min_cnorm."""
    activation_similarity: sp.csr_matrix
    """[n, n] float32 D = BᵀB on the same pattern as C."""
    cooc_top_indices: np.ndarray
    """[n, m] int32 the m features j ≠ i with the largest C_norm[i, j] (-1 pads)."""
    cooc_top_values: np.ndarray
    """[n, m] float32 their C_norm[i, j] (0 pads)."""


class Neighbours(NamedTuple):
    indices: np.ndarray
    """[n, m] int32."""
    values: np.ndarray
    """[n, m] float32."""


def feature_summary(codes: sp.csr_matrix, bins: int) -> FeatureSummary:
    """Per-feature counts, density, mean/max activation and histogram from CSR codes [N, n]."""
    csc = codes.tocsc()
    n = csc.shape[1]
    counts = np.diff(csc.indptr).astype(np.int64)  # [n]
    col = np.repeat(np.arange(n), counts)  # [nnz] feature of each stored value
    sums = np.bincount(col, weights=csc.data, minlength=n)
    mean = np.divide(sums, counts, out=np.zeros(n), where=counts > 0).astype(np.float32)
    max_act = np.asarray(csc.max(axis=0).todense()).reshape(-1).astype(np.float32)
    scale = np.divide(bins, max_act, out=np.zeros(n, dtype=np.float32), where=max_act > 0)
    bin_of = np.minimum((csc.data * scale[col]).astype(np.int64), bins - 1)
    hist = np.bincount(col * bins + bin_of, minlength=n * bins).reshape(n, bins)
    density = counts / max(1, codes.shape[0])
    return FeatureSummary(counts, density, mean, max_act, hist)


def c_norm(cooc: sp.csr_matrix, counts: np.ndarray, eps: float = 1e-8) -> sp.csr_matrix:
    """C_norm[i, j] = C[i, j] / (f_i + ε), rows scaled, same sparsity pattern."""
    return (sp.diags(1.0 / (counts.astype(np.float64) + eps)) @ cooc).tocsr().astype(np.float32)


def top_m_per_row(block: sp.csr_matrix, m: int, row_offset: int,
                  prefilter: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Largest m off-diagonal values of each row of a CSR block → ([b, m] cols, [b, m] values).

    The diagonal is the entry (r, row_offset + r). Ties go to the smaller column. Pads: -1, 0.
    With `prefilter` > 0 only values ≥ prefilter are sorted, except in rows that have fewer
    than m of them: exact, and far less to sort in the long rows of dense features.
    """
    b = block.shape[0]
    rows = np.repeat(np.arange(b), np.diff(block.indptr))
    cols, vals = block.indices, block.data
    sel = cols != rows + row_offset
    if prefilter > 0:
        high = sel & (vals >= prefilter)
        short_rows = np.bincount(rows[high], minlength=b) < m
        sel = high | (sel & short_rows[rows])
    rows, cols, vals = rows[sel], cols[sel], vals[sel]
    rows, cols, vals = _by_row_value_column(rows, cols, vals, b, block.shape[1])
    starts = np.searchsorted(rows, np.arange(b))
    rank = np.arange(len(rows)) - starts[rows]
    keep = rank < m
    out_idx = np.full((b, m), -1, dtype=np.int32)
    out_val = np.zeros((b, m), dtype=np.float32)
    out_idx[rows[keep], rank[keep]] = cols[keep]
    out_val[rows[keep], rank[keep]] = vals[keep]
    return out_idx, out_val


def _by_row_value_column(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, b: int,
                         n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries ordered by row, then value descending, then column.

    Non-negative float32 values order as their bit patterns do, so (row, ~value bits, column) packs into one
    uint64 when the widths fit (2,048 rows × 12,288 columns: 11 + 32 + 14 bits) and one sort of those keys
    replaces a three-key lexsort (about 20 times faster on a block of 20 million entries); the entries are read
    back from the sorted keys. Otherwise (wider blocks, other dtypes, negative values) the lexsort."""
    row_bits, col_bits = max(1, int(b - 1).bit_length()), max(1, int(n - 1).bit_length())
    if vals.dtype != np.float32 or row_bits + 32 + col_bits > 64 or (len(vals) and vals.min() < 0):
        order = np.lexsort((cols, -vals, rows))
        return rows[order], cols[order], vals[order]
    down = np.uint64(0xFFFFFFFF) - vals.view(np.uint32).astype(np.uint64)  # larger value, smaller key
    keys = (rows.astype(np.uint64) << np.uint64(32 + col_bits)) | (down << np.uint64(col_bits)) | cols.astype(np.uint64)
    keys.sort()
    col_mask = np.uint64((1 << col_bits) - 1)
    out_vals = (np.uint64(0xFFFFFFFF) - ((keys >> np.uint64(col_bits)) & np.uint64(0xFFFFFFFF))).astype(np.uint32)
    return ((keys >> np.uint64(32 + col_bits)).astype(rows.dtype), (keys & col_mask).astype(cols.dtype),
            out_vals.view(np.float32))


def _prune(block: sp.csr_matrix, counts: np.ndarray, start: int, min_cnorm: float) -> np.ndarray:
    """Mask of the block's stored entries with C_norm ≥ min_cnorm in either direction."""
    rows = np.repeat(np.arange(block.shape[0]) + start, np.diff(block.indptr))
    smaller = np.minimum(counts[rows], counts[block.indices])
    return block.data >= min_cnorm * smaller  # C/min(f_i, f_j) = max(C_norm[i,j], C_norm[j,i])


DENSE_GAIN = 100
"""How many times more multiply-adds a dense BLAS product may do than scipy's sparse one and still win.
Measured (`bench/sae_stats.py`, 2 cores, AVX2 caps): about 7 ns a sparse multiply-add, 0.02 ns a dense one,
so break-even is near 300; 100 keeps a margin (plain TopK rows, 32 of 3,072, stay sparse: dense is 10× slower
there)."""
DENSE_CHUNK_FLOATS = 1 << 23
"""Rows of the codes densified at a time: at most this many floats (32 MiB)."""


def dense_is_cheaper(codes: sp.csr_matrix) -> bool:
    """Whether C = AᵀA costs less dense: Σ_d nnz_d² (the sparse product's work) × DENSE_GAIN above N·n²."""
    per_row = np.diff(codes.indptr).astype(np.float64)
    return float(per_row @ per_row) * DENSE_GAIN > codes.shape[0] * float(codes.shape[1]) ** 2


def _dense_block(b_csr: sp.csr_matrix, start: int, stop: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Rows [start, stop) of C and D by dense products over chunks of rows; both sparse, C's pattern."""
    n_docs, n = b_csr.shape
    c = torch.zeros(stop - start, n)  # [b, n]
    d = torch.zeros(stop - start, n)  # [b, n]
    chunk = max(1, DENSE_CHUNK_FLOATS // n)
    for r in range(0, n_docs, chunk):
        rows = torch.from_numpy(b_csr[r:r + chunk].toarray())  # [R, n]
        ones = (rows != 0).float()  # [R, n]
        c.addmm_(ones[:, start:stop].T, ones)
        d.addmm_(rows[:, start:stop].T, rows)
    c_np, d_np = c.numpy(), d.numpy()
    row, col = np.nonzero(c_np)  # row-major: sorted indices within each row
    indptr = np.zeros(stop - start + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=stop - start), out=indptr[1:])
    col32 = col.astype(np.int32)
    return (sp.csr_matrix((c_np[row, col], col32, indptr), shape=(stop - start, n)),
            sp.csr_matrix((d_np[row, col], col32.copy(), indptr.copy()), shape=(stop - start, n)))


def pairwise(codes: sp.csr_matrix, counts: np.ndarray, cfg: StatsConfig, *, dense: bool | None = None) -> Pairwise:
    """C, D and the top-m co-occurring features, `cfg.block_latents` rows of C at a time; `dense`: the
    blocks by dense products (None: where `dense_is_cheaper`)."""
    b_csr = codes.tocsr().astype(np.float32)
    dense = dense_is_cheaper(b_csr) if dense is None else dense
    if not dense:
        a_csr = b_csr.copy()
        a_csr.data[:] = 1.0
        a_csc, b_csc = a_csr.tocsc(), b_csr.tocsc()
    n = codes.shape[1]
    c_parts, d_parts, top_idx, top_val = [], [], [], []
    inv = (1.0 / (counts + cfg.eps)).astype(np.float32)
    for start in range(0, n, cfg.block_latents):
        stop = min(n, start + cfg.block_latents)
        if dense:
            c_blk, d_blk = _dense_block(b_csr, start, stop)
        else:
            c_blk = (a_csc[:, start:stop].T @ a_csr).tocsr()  # [b, n] counts
            d_blk = (b_csc[:, start:stop].T @ b_csr).tocsr()  # [b, n]
        if not _same_pattern(c_blk, d_blk):  # same inputs' pattern: usually the same order already
            c_blk.sort_indices()
            d_blk.sort_indices()
            if not _same_pattern(c_blk, d_blk):
                raise ValueError("codes hold explicit zeros: C and D patterns differ")
        norm_blk = sp.csr_matrix((c_blk.data * inv[start:stop].repeat(np.diff(c_blk.indptr)),
                                  c_blk.indices, c_blk.indptr), shape=c_blk.shape)
        idx, val = top_m_per_row(norm_blk, cfg.top_m, start, prefilter=0.05)
        top_idx.append(idx)
        top_val.append(val)
        keep = _prune(c_blk, counts, start, cfg.store_min_cnorm)
        c_parts.append(_masked(c_blk, keep))
        d_parts.append(_masked(d_blk, keep))
    cooc = sp.vstack(c_parts, format="csr")
    act_sim = sp.vstack(d_parts, format="csr")
    cooc.sort_indices()
    act_sim.sort_indices()
    return Pairwise(cooc, act_sim, np.concatenate(top_idx), np.concatenate(top_val))


def _same_pattern(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def _masked(block: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    rows = np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=block.shape[0]))])
    return sp.csr_matrix((block.data[keep], block.indices[keep], indptr), shape=block.shape)


@torch.no_grad()
def decoder_neighbours(w_dec: np.ndarray | torch.Tensor, m: int, chunk: int = 1024) -> Neighbours:
    """For each decoder row [n, d], the m other rows of largest cosine, by [chunk, n] blocks."""
    w = torch.as_tensor(w_dec, dtype=torch.float32)
    w = w / w.norm(dim=1, keepdim=True).clamp_min(1e-12)
    n = w.shape[0]
    m_eff = min(m, n - 1)
    out_idx = np.full((n, m), -1, dtype=np.int32)
    out_val = np.zeros((n, m), dtype=np.float32)
    for start in range(0, n, chunk):
        sims = w[start:start + chunk] @ w.T  # [c, n]
        rows = torch.arange(sims.shape[0])
        sims[rows, rows + start] = -torch.inf  # not its own neighbour
        val, idx = sims.topk(m_eff, dim=1)
        out_idx[start:start + chunk, :m_eff] = idx.numpy()
        out_val[start:start + chunk, :m_eff] = val.numpy()
    return Neighbours(out_idx, out_val)
