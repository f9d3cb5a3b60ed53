"""Heatmap data: small dense submatrices of C_norm and decoder cosine, ordered so that
blocks of related features sit together (average-linkage clustering with optimal leaf
ordering on 1 - similarity). The gateway renders them; here only numbers and orders.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.cluster.hierarchy import leaves_list, linkage
from scipy.spatial.distance import squareform


def cluster_order(similarity: np.ndarray) -> np.ndarray:
    """Leaf order [h] of average-linkage clustering of a symmetric similarity [h, h] in [0, 1]."""
    h = similarity.shape[0]
    if h < 3:
        return np.arange(h)
    dist = np.clip(1.0 - similarity, 0.0, None).astype(np.float64)
    np.fill_diagonal(dist, 0.0)
    dist = (dist + dist.T) / 2
    return leaves_list(linkage(squareform(dist, checks=False), method="average", optimal_ordering=True))


def connectivity(cnorm: sp.csr_matrix, tau: float) -> np.ndarray:
    """[n] number of features j ≠ i with max(C_norm[i, j], C_norm[j, i]) ≥ τ."""
    strong = (cnorm >= tau).astype(np.int8)
    sym = ((strong + strong.T) > 0).tocsr()
    sym.setdiag(0)
    sym.eliminate_zeros()
    return np.diff(sym.indptr)


def heatmap(features: np.ndarray, cnorm: sp.csr_matrix, w_dec: np.ndarray) -> dict[str, Any]:
    """Ordered features and their C_norm and decoder-cosine submatrices ([h, h] lists)."""
    sub = cnorm[features][:, features].toarray()  # [h, h], directed: row i, column j
    w = w_dec[features] / np.maximum(np.linalg.norm(w_dec[features], axis=1, keepdims=True), 1e-12)
    cos = w @ w.T
    order = cluster_order(np.maximum(sub, sub.T))
    f, sub, cos = features[order], sub[order][:, order], cos[order][:, order]
    return {"features": f.tolist(), "c_norm": np.round(sub, 4).tolist(),
            "decoder_cosine": np.round(cos, 4).tolist()}


def build_heatmaps(counts: np.ndarray, cnorm: sp.csr_matrix, w_dec: np.ndarray, size: int,
                   tau: float) -> dict[str, Any]:
    """The densest and the most connected features (by C_norm ≥ τ degree), each ordered."""
    size = min(size, len(counts))
    densest = np.argsort(-counts, kind="stable")[:size]
    degree = connectivity(cnorm, tau)
    connected = np.lexsort((-counts, -degree))[:size]
    return {"densest": heatmap(densest, cnorm, w_dec), "most_connected": heatmap(connected, cnorm, w_dec)}
