"""Feature families (O'Neill et al. 2024): thresholded C_norm → maximum spanning tree → DFS.

The graph is undirected with weight w(i, j) = max(C_norm[i, j], C_norm[j, i]) =
C[i, j] / min(f_i, f_j): the share of the sparser feature's documents in which the denser
one also fires, which is what makes the denser one a parent. (The paper builds an
undirected graph from the non-symmetric C_norm; taking the max makes that choice explicit
and order-independent.) Edges with w ≥ τ are kept, a maximum spanning forest is taken
(Kruskal's, ties broken by the lower (i, j): scipy's csgraph over the edges' ranks, since a
corpus's graph has millions of edges; networkx for the forest itself), each edge is
oriented from the denser feature to the sparser one (ties: the lower index is the
parent), and every root with children gives a family by depth-first
search. The roots are then removed and the forest rebuilt from the same thresholded
graph, with the same τ, for `iterations` rounds.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from contracts.sae import FamiliesConfig, FeatureFamily


def thresholded_edges(cooc: sp.spmatrix, counts: np.ndarray, tau: float, eps: float = 1e-8):
    """Edges (i < j) with C[i, j] / (min(f_i, f_j) + ε) ≥ τ → (i [E], j [E], weight [E])."""
    upper = sp.triu(sp.csr_matrix(cooc), k=1).tocoo()
    i, j = upper.row.astype(np.int64), upper.col.astype(np.int64)
    w = upper.data / (np.minimum(counts[i], counts[j]) + eps)
    keep = w >= tau
    return i[keep], j[keep], w[keep]


def maximum_spanning_forest(i: np.ndarray, j: np.ndarray, w: np.ndarray, n: int) -> list[tuple[int, int]]:
    """The edges (i, j) of the maximum spanning forest of the graph on n nodes with edges (i [E],
    j [E], weight w [E]), as Kruskal's algorithm takes them in the order (weight descending, then
    i, then j): unique for that order. scipy's minimum spanning tree over each edge's rank in the
    order (distinct weights, so its own tie-breaking never applies); the demo's 4.5 M edges take
    about a second, where networkx's pure-Python Kruskal took 9 s per iteration."""
    if len(i) == 0:
        return []
    order = np.lexsort((j, i, -w))  # last key first: weight descending, then i, then j
    rank = np.empty(len(order), dtype=np.float64)
    rank[order] = np.arange(1, len(order) + 1)  # 1..E: a zero would read as no edge
    tree = minimum_spanning_tree(sp.csr_matrix((rank, (i, j)), shape=(n, n))).tocoo()
    return list(zip(tree.row.tolist(), tree.col.tolist()))


def oriented_forest(edges: list[tuple[int, int]], counts: np.ndarray) -> nx.DiGraph:
    """Each tree edge from the denser feature (parent) to the sparser (child)."""
    forest = nx.DiGraph()
    for a, b in edges:
        parent, child = (a, b) if (counts[a], -a) > (counts[b], -b) else (b, a)
        forest.add_edge(parent, child)
    return forest


def families_of_forest(forest: nx.DiGraph, iteration: int, min_size: int) -> list[FeatureFamily]:
    """One family per root (no parent): the root and what DFS reaches from it."""
    families = []
    for root in sorted(n for n in forest.nodes if forest.in_degree(n) == 0):
        edges = list(nx.dfs_edges(forest, root))
        children = [child for _, child in edges]
        if 1 + len(children) >= min_size:
            families.append(FeatureFamily(iteration=iteration, parent=int(root),
                                          children=[int(c) for c in children],
                                          edges=[(int(p), int(c)) for p, c in edges]))
    return families


def build_families(cooc: sp.spmatrix, counts: np.ndarray, cfg: FamiliesConfig,
                   eps: float = 1e-8) -> list[FeatureFamily]:
    """Families of every iteration, in order; iteration i runs without the parents of 0..i-1."""
    counts = np.asarray(counts)
    i, j, w = thresholded_edges(cooc, counts, cfg.tau, eps)
    removed = np.zeros(len(counts), dtype=bool)
    families: list[FeatureFamily] = []
    for iteration in range(cfg.iterations):
        alive = ~(removed[i] | removed[j])
        tree = maximum_spanning_forest(i[alive], j[alive], w[alive], len(counts))
        found = families_of_forest(oriented_forest(tree, counts), iteration, cfg.min_family_size)
        if not found:
            break
        families.extend(found)
        removed[[f.parent for f in found]] = True
    return families
