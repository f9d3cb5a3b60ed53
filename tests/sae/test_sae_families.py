"""Families on a hand-built co-occurrence matrix whose families are known in advance."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from contracts.sae import FamiliesConfig
from services.sae.families import build_families, thresholded_edges


def hand_built():
    """Features and their document counts f_i (the diagonal of C):

        0 (f=100) ─┬─ 1 (f=40) ─┬─ 3 (f=20)
                   │            └─ 4 (f=15)
                   └─ 2 (f=30) ─── 5 (f=10)
        6 (f=50) ──── 7 (f=12)          8 (f=5): weak links only

    Off-tree pairs co-occur weakly (C_norm < τ) or less than the tree edges.
    """
    f = np.array([100, 40, 30, 20, 15, 10, 50, 12, 5])
    c = np.zeros((9, 9))
    np.fill_diagonal(c, f)
    strong = {(0, 1): 30, (0, 2): 20, (1, 3): 15, (1, 4): 12, (2, 5): 8, (6, 7): 9,
              (0, 3): 12, (0, 5): 4}  # (0, 3) and (0, 5) weaker than the tree path, not tree edges
    weak = {(3, 4): 1, (6, 8): 0.2, (0, 6): 2}
    for (i, j), v in {**strong, **weak}.items():
        c[i, j] = c[j, i] = v
    return sp.csr_matrix(c), f


def _as_sets(families):
    return {(f.iteration, f.parent, frozenset(f.children)) for f in families}


def test_thresholded_edges_use_the_sparser_feature():
    c, f = hand_built()
    i, j, w = thresholded_edges(c, f, tau=0.1)
    edges = dict(zip(zip(i.tolist(), j.tolist()), w.tolist()))
    assert (6, 8) not in edges  # 0.2 / 5 = 0.04 < τ
    assert (0, 6) not in edges  # 2 / 50 = 0.04
    assert abs(edges[(0, 1)] - 30 / 40) < 1e-6
    assert (3, 4) not in edges  # 1 / 15 < 0.1


def test_families_and_parent_removal_iterations():
    c, f = hand_built()
    fams = build_families(c, f, FamiliesConfig(tau=0.1, iterations=3))
    assert _as_sets(fams) == {
        (0, 0, frozenset({1, 2, 3, 4, 5})),
        (0, 6, frozenset({7})),
        # parents 0 and 6 removed: the tree is rebuilt without them
        (1, 1, frozenset({3, 4})),
        (1, 2, frozenset({5})),
        # parents 1 and 2 removed: only isolated features remain, no third family
    }
    first = next(x for x in fams if x.parent == 0)
    assert set(first.edges) == {(0, 1), (0, 2), (1, 3), (1, 4), (2, 5)}
    assert first.children[0] == 1  # depth-first: 1's subtree before 2


def test_one_tau_for_every_iteration():
    c, f = hand_built()
    strict = build_families(c, f, FamiliesConfig(tau=0.55, iterations=3))
    # at τ = 0.55 only 0-1 (0.75), 6-7 (0.75), 1-3 (0.75), 1-4 (0.8), 2-5 (0.8), 0-2 (0.67), 0-3 (0.6) pass
    assert _as_sets(strict) == {
        (0, 0, frozenset({1, 2, 3, 4, 5})), (0, 6, frozenset({7})),
        (1, 1, frozenset({3, 4})), (1, 2, frozenset({5})),
    }
    # at τ = 0.79 only 1-4 and 2-5 (0.8) pass, in the first iteration as in the second
    strictest = build_families(c, f, FamiliesConfig(tau=0.79, iterations=3))
    assert _as_sets(strictest) == {(0, 1, frozenset({4})), (0, 2, frozenset({5}))}


def test_min_family_size_and_iterations_limit():
    c, f = hand_built()
    fams = build_families(c, f, FamiliesConfig(tau=0.1, iterations=1, min_family_size=3))
    assert _as_sets(fams) == {(0, 0, frozenset({1, 2, 3, 4, 5}))}


def test_maximum_spanning_forest_matches_networkx_weight_and_breaks_ties_by_index():
    """scipy's spanning tree over the edges' ranks against networkx's Kruskal on random graphs:
    the same edges where weights are distinct, the same total weight where they tie (many
    integer weights), and ties taken in (i, j) order."""
    import networkx as nx

    from services.sae.families import maximum_spanning_forest

    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(2, 60))
        pairs = np.array([(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.15], dtype=np.int64)
        if not len(pairs):
            continue
        i, j = pairs[:, 0], pairs[:, 1]
        w = rng.random(len(i)) if trial % 2 else rng.integers(1, 4, len(i)).astype(float)
        g = nx.Graph()
        g.add_weighted_edges_from(zip(i.tolist(), j.tolist(), w.tolist()))
        theirs = nx.maximum_spanning_tree(g, algorithm="kruskal")
        ours = maximum_spanning_forest(i, j, w, n)
        weight = dict(zip(zip(i.tolist(), j.tolist()), w.tolist()))
        assert len(ours) == theirs.number_of_edges()
        assert abs(sum(weight[e] for e in ours) - theirs.size(weight="weight")) < 1e-9
        if trial % 2:  # distinct weights: one maximum forest
            assert {tuple(sorted(e)) for e in ours} == {tuple(sorted(e)) for e in theirs.edges()}
    # a triangle of equal weights: Kruskal in (i, j) order keeps 0-1 and 0-2
    tri = maximum_spanning_forest(np.array([0, 0, 1]), np.array([1, 2, 2]), np.ones(3), 3)
    assert sorted(tri) == [(0, 1), (0, 2)]
    assert maximum_spanning_forest(np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([]), 4) == []
