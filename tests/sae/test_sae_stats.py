"""Sparse statistics against dense numpy on a small random case."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from contracts.sae import StatsConfig
from services.sae.stats import c_norm, decoder_neighbours, feature_summary, pairwise, top_m_per_row


def random_codes(n_docs=60, n=23, k=4, seed=0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.choice(n, k, replace=False, p=np.linspace(2, 1, n) / np.linspace(2, 1, n).sum())
                    for _ in range(n_docs)])
    acts = rng.uniform(0.1, 3.0, (n_docs, k)).astype(np.float32)
    return sp.csr_matrix((acts.ravel(), idx.ravel(), np.arange(0, n_docs * k + 1, k)), shape=(n_docs, n))


def test_feature_summary_matches_dense():
    codes = random_codes()
    dense = codes.toarray()
    s = feature_summary(codes, bins=5)
    fires = dense > 0
    np.testing.assert_array_equal(s.counts, fires.sum(0))
    np.testing.assert_allclose(s.density, fires.mean(0))
    np.testing.assert_allclose(s.max_activation, dense.max(0))
    mean = np.where(fires.sum(0) > 0, dense.sum(0) / np.maximum(fires.sum(0), 1), 0)
    np.testing.assert_allclose(s.mean_activation, mean, rtol=1e-6)
    for j in range(dense.shape[1]):
        v = dense[fires[:, j], j]
        if len(v):
            ref = np.minimum((v * (5 / v.max())).astype(int), 4)
            np.testing.assert_array_equal(s.histogram[j], np.bincount(ref, minlength=5))
    assert s.histogram.sum() == codes.nnz


@pytest.mark.parametrize("dense_products", [False, True])
@pytest.mark.parametrize("block", [1, 5, 100])
def test_pairwise_matches_dense(block, dense_products):
    codes = random_codes(seed=block)
    dense = codes.toarray().astype(np.float64)
    a = (dense > 0).astype(np.float64)
    cfg = StatsConfig(store_min_cnorm=0.0, top_m=3, block_latents=block)
    counts = a.sum(0).astype(np.int64)
    p = pairwise(codes, counts, cfg, dense=dense_products)
    np.testing.assert_allclose(p.cooccurrence.toarray(), a.T @ a)
    np.testing.assert_allclose(p.activation_similarity.toarray(), dense.T @ dense, rtol=1e-5)
    cn_dense = (a.T @ a) / (counts[:, None] + cfg.eps)
    np.testing.assert_allclose(c_norm(p.cooccurrence, counts, cfg.eps).toarray(), cn_dense, rtol=1e-6)
    off = cn_dense.copy()
    np.fill_diagonal(off, -1)
    for i in range(off.shape[0]):
        ref = np.sort(off[i][off[i] > 0])[::-1][:3]
        got = p.cooc_top_values[i][p.cooc_top_indices[i] >= 0]
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        np.testing.assert_allclose(off[i, p.cooc_top_indices[i][: len(ref)]], ref, rtol=1e-6)


@pytest.mark.parametrize("dense", [False, True])
def test_pruning_keeps_pairs_above_floor_in_either_direction(dense):
    codes = random_codes(n_docs=200, n=30, k=3, seed=7)
    a = (codes.toarray() > 0).astype(np.float64)
    counts = a.sum(0).astype(np.int64)
    floor = 0.2
    p = pairwise(codes, counts, StatsConfig(store_min_cnorm=floor, block_latents=7), dense=dense)
    c = a.T @ a
    cn = c / counts[:, None]
    want = (np.maximum(cn, cn.T) >= floor) & (c > 0)
    np.testing.assert_array_equal(p.cooccurrence.toarray() > 0, want)
    np.testing.assert_allclose(p.cooccurrence.toarray()[want], c[want])


def test_dense_and_sparse_products_give_the_same_statistics_in_chunks(monkeypatch):
    """Max-pooled document codes (many features a row) choose the dense path; it equals the sparse one,
    C exactly, D to float32 rounding, also when the rows are densified a few at a time."""
    import services.sae.stats as stats

    rows = [random_codes(n_docs=30, n=40, k=4, seed=s) for s in range(6)]
    pooled = sp.csr_matrix(np.max(np.stack([r.toarray() for r in rows]), axis=0))  # [30, 40], ~40 % dense
    sparse_k = random_codes(n_docs=300, n=4000, k=4, seed=1)
    assert stats.dense_is_cheaper(pooled) and not stats.dense_is_cheaper(sparse_k)
    monkeypatch.setattr(stats, "DENSE_CHUNK_FLOATS", 7 * 40)  # 7 rows a chunk: 5 chunks, the last partial
    counts = np.asarray((pooled > 0).sum(0)).ravel().astype(np.int64)
    cfg = StatsConfig(store_min_cnorm=0.05, top_m=4, block_latents=16)
    want, got = pairwise(pooled, counts, cfg, dense=False), pairwise(pooled, counts, cfg)
    for name in ("cooccurrence", "activation_similarity"):
        w, g = getattr(want, name), getattr(got, name)
        np.testing.assert_array_equal(g.indptr, w.indptr)
        np.testing.assert_array_equal(g.indices, w.indices)
    np.testing.assert_array_equal(got.cooccurrence.data, want.cooccurrence.data)
    np.testing.assert_allclose(got.activation_similarity.data, want.activation_similarity.data, rtol=1e-6)
    np.testing.assert_array_equal(got.cooc_top_indices, want.cooc_top_indices)
    np.testing.assert_array_equal(got.cooc_top_values, want.cooc_top_values)


def test_top_m_per_row_pads_and_skips_diagonal():
    block = sp.csr_matrix(np.array([[5.0, 1.0, 0.0, 2.0], [0.0, 9.0, 0.0, 0.0]]))
    idx, val = top_m_per_row(block, 3, row_offset=0)
    np.testing.assert_array_equal(idx, [[3, 1, -1], [-1, -1, -1]])
    np.testing.assert_array_equal(val, [[2.0, 1.0, 0.0], [0.0, 0.0, 0.0]])


def test_decoder_neighbours_match_dense():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((37, 6)).astype(np.float32)
    nb = decoder_neighbours(w, m=4, chunk=8)
    u = w / np.linalg.norm(w, axis=1, keepdims=True)
    cos = u @ u.T
    np.fill_diagonal(cos, -np.inf)
    ref_idx = np.argsort(-cos, axis=1)[:, :4]
    np.testing.assert_array_equal(nb.indices, ref_idx)
    np.testing.assert_allclose(nb.values, np.take_along_axis(cos, ref_idx, 1), rtol=1e-5)


@pytest.mark.parametrize("prefilter", [0.05, 0.3, 0.9])
def test_top_m_prefilter_is_exact(prefilter):
    rng = np.random.default_rng(int(prefilter * 100))
    block = sp.random(40, 50, density=0.3, random_state=rng, format="csr", dtype=np.float32)
    block.data = np.round(block.data, 1)  # ties
    exact = top_m_per_row(block, 6, row_offset=10)
    fast = top_m_per_row(block, 6, row_offset=10, prefilter=prefilter)
    np.testing.assert_array_equal(exact[0], fast[0])
    np.testing.assert_array_equal(exact[1], fast[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_m_per_row_matches_a_row_by_row_sort(dtype):
    """Ties broken by the smaller column, the diagonal skipped, rows padded: the packed-key sort of float32
    blocks and the lexsort of the others give what sorting each row alone gives."""
    rng = np.random.default_rng(7)
    block = sp.random(60, 300, density=0.2, random_state=rng, format="csr", dtype=dtype)
    block.data = (np.round(block.data * 8) / 8).astype(dtype)  # many ties
    block.data[::50] = 0.0  # explicit zeros are entries too
    m, offset = 7, 11
    idx, val = top_m_per_row(block, m, row_offset=offset)
    for r in range(block.shape[0]):
        lo, hi = block.indptr[r], block.indptr[r + 1]
        row = sorted((-float(v), int(c)) for c, v in zip(block.indices[lo:hi], block.data[lo:hi]) if c != r + offset)[:m]
        want_idx = [c for _, c in row] + [-1] * (m - len(row))
        want_val = [-v for v, _ in row] + [0.0] * (m - len(row))
        np.testing.assert_array_equal(idx[r], want_idx)
        np.testing.assert_array_equal(val[r], np.array(want_val, dtype=np.float32))
