"""Evidence sampling: held-out documents never shown, quantiles covered, hard negatives, excerpts."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.interpret import EvidenceConfig
from services.interpreter.corpus import load_corpus
from services.interpreter.evidence import (FeatureTooRare, Neighbours, anchors_of, cut_excerpt, excerpts,
                                           quantile_sample, sample_evidence, strongest_chunk)
from services.interpreter.sae_encoder import SaeEncoder


@pytest.fixture(scope="module")
def corpus(synthetic):
    store, ref = synthetic
    return load_corpus(store, ref)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("feature", [0, 3, 5, 7])
def test_held_out_documents_are_never_evidence(corpus, feature, seed):
    ev = sample_evidence(corpus, feature, EvidenceConfig(seed=seed), pool=300)
    shown = {*ev.activating, *ev.random_negatives, *ev.hard_negatives, *ev.pool_activating, *ev.pool_non_activating}
    held = {*ev.holdout_activating, *ev.holdout_non_activating}
    assert not shown & held
    active = set(corpus.column(feature)[0].tolist())
    assert set(ev.activating) <= active and set(ev.holdout_activating) <= active
    assert not (set(ev.random_negatives) | set(ev.hard_negatives) | set(ev.holdout_non_activating)) & active
    assert len(ev.holdout_activating) == min(20, len(active) // 2)
    if corpus.n_docs - len(active) >= 40:  # feature 7 fires almost everywhere: 2 negatives in all
        assert len(ev.holdout_non_activating) == 20 == len(set(ev.holdout_non_activating))
    stored = ev.ids(pools=True)
    assert not ({*stored.activating, *stored.random_negatives, *stored.hard_negatives}
                & {*stored.holdout_activating, *stored.holdout_non_activating})


def test_same_seed_same_evidence(corpus):
    a, b = (sample_evidence(corpus, 2, EvidenceConfig(seed=4)) for _ in range(2))
    assert a == b


def test_shown_activating_span_the_quantiles(corpus):
    ev = sample_evidence(corpus, 1, EvidenceConfig(activating=8, quantiles=4))
    _, acts = corpus.column(1)
    rest = np.sort(np.asarray([a for p, a in zip(*corpus.column(1)) if p not in ev.holdout_activating]))[::-1]
    assert ev.activations == sorted(ev.activations, reverse=True)
    assert ev.activations[0] == pytest.approx(rest[0])  # the top bin gives its strongest
    assert min(ev.activations) < np.median(rest)  # not only the very top


def test_quantile_sample_takes_top_and_every_bin():
    rng = np.random.default_rng(0)
    order = np.arange(100)
    picked = quantile_sample(order, 8, 4, rng)
    assert len(picked) == 8 and picked[0] == 0 and picked[1] == 1
    assert [int(np.sum((picked >= lo) & (picked < lo + 25))) for lo in (0, 25, 50, 75)] == [2, 2, 2, 2]


def test_hard_negatives_are_the_neighbours_of_the_strongest_activating_documents(corpus):
    cfg = EvidenceConfig(seed=0, hard_negative_anchors=3)
    ev = sample_evidence(corpus, 4, cfg)
    active, acts = corpus.column(4)
    rest = [(a, p) for p, a in zip(active.tolist(), acts.tolist()) if p not in ev.holdout_activating]
    anchors = [p for _, p in sorted(rest, reverse=True)[:3]]
    sims = corpus.vectors[anchors] @ corpus.vectors.T  # [3, N]
    sims[:, active] = -np.inf
    first = [int(np.argmax(row)) for row in sims]  # each anchor's nearest non-activating document
    hard = [*ev.holdout_non_activating[:10], *ev.hard_negatives]
    assert set(first) <= set(hard)
    assert ev.holdout_non_activating[0] == first[0]  # the strongest one's nearest, dealt to held-out first
    near = (corpus.vectors[hard] @ corpus.vectors[anchors].T).max(1)
    rand = (corpus.vectors[ev.random_negatives] @ corpus.vectors[anchors].T).max(1)
    assert near.mean() > rand.mean()


def test_hard_negatives_nearest_the_centroid(corpus):
    ev = sample_evidence(corpus, 4, EvidenceConfig(seed=0, hard_negatives_from="centroid"))
    active, _ = corpus.column(4)
    centroid = corpus.vectors[active].mean(0)
    hard = corpus.vectors[ev.hard_negatives] @ centroid
    rand = corpus.vectors[ev.random_negatives] @ centroid
    assert hard.mean() > rand.mean()
    held_hard = ev.holdout_non_activating[:10]
    assert (corpus.vectors[held_hard] @ centroid).mean() > rand.mean()


def test_rare_feature_is_refused(corpus):
    with pytest.raises(FeatureTooRare):
        sample_evidence(corpus, 6, EvidenceConfig())


def test_excerpt_is_centred_on_the_strongest_chunk(corpus):
    text = corpus.text(14)  # topic 2
    span = strongest_chunk(corpus, 14, 2)
    assert span is not None and "diabetes" in text[span[0]:span[1]]
    (excerpt,) = excerpts(corpus, 2, [14], 60)
    assert "diabetes" in excerpt and "routine" not in excerpt and len(excerpt) <= 62
    # the filler feature's strongest chunk is the first one
    span7 = strongest_chunk(corpus, 14, 7)
    assert span7 is not None and "routine" in text[span7[0]:span7[1]]


def test_cut_excerpt_keeps_short_texts_and_cuts_at_spaces():
    assert cut_excerpt("short text", (0, 5), 100) == "short text"
    text = " ".join(f"w{i}" for i in range(200))
    cut = cut_excerpt(text, (300, 320), 50)
    assert cut.startswith("…") and cut.endswith("…") and "w" in cut and len(cut) <= 52
    assert text[310:315].strip().split()[0] in cut


def test_numpy_encoder_matches_the_sae_service(tmp_path):
    torch = pytest.importorskip("torch")
    from artifacts import ArtifactStore
    from contracts.sae import SaeConfig
    from services.sae.io import save_sae
    from services.sae.model import TopKSae

    store = ArtifactStore(str(tmp_path))
    sae = TopKSae(16, 64, 4, seed=3)
    with torch.no_grad():
        sae.encoder.bias.normal_(0, 0.1)
        sae.b_dec.normal_(0, 0.1)
    save_sae(store, "s", sae, SaeConfig(expansion_factor=4, k=4))
    x = np.random.default_rng(0).normal(size=(10, 16)).astype(np.float32)
    ref_acts, ref_idx = (t.detach().numpy() for t in sae.encode(torch.from_numpy(x)))
    acts, idx = SaeEncoder.load(store, "s").encode(x)
    for r in range(10):
        want = dict(zip(ref_idx[r].tolist(), ref_acts[r].tolist()))
        got = dict(zip(idx[r].tolist(), acts[r].tolist()))
        assert want.keys() == got.keys()
        np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pool", [50_000, 100])  # 100: a sample of the distinct vectors searched
@pytest.mark.parametrize("depth", [6, 140, 512])  # 6: every list runs short (searched again); 140: 10 of 70 do
def test_neighbours_found_for_a_batch_give_the_same_evidence(corpus, depth, pool, monkeypatch):
    from services.interpreter import neighbours

    monkeypatch.setattr(neighbours, "SEARCHED", pool)
    assert (Neighbours(corpus)._pool is None) == (len(corpus.distinct.vectors) <= pool)
    cfg = EvidenceConfig(seed=0)
    features = [f for f in range(corpus.n_features) if len(anchors_of(corpus, f, cfg))]
    batch = Neighbours(corpus, depth=depth, block=4)
    batch.prefetch(a for f in features for a in anchors_of(corpus, f, cfg).tolist())
    assert len(features) >= 4 and len(batch._near) >= 10
    for f in features:
        assert sample_evidence(corpus, f, cfg, pool=50, neighbours=batch) == sample_evidence(corpus, f, cfg, pool=50)


def test_neighbours_found_on_several_threads_are_those_found_on_one(corpus, monkeypatch):
    """prefetch's blocks run on a thread pool (each product on one BLAS thread): the same neighbours,
    in the same order, as one thread finds them block after block."""
    from services.interpreter import neighbours

    cfg = EvidenceConfig(seed=0)
    anchors = [a for f in range(corpus.n_features) for a in anchors_of(corpus, f, cfg).tolist()]
    found = {}
    for threads in (1, 3):
        monkeypatch.setattr(neighbours, "PREFETCH_THREADS", threads)
        batch = Neighbours(corpus, depth=140, block=2)
        batch.prefetch(anchors)
        found[threads] = batch._near
    assert len(found[1]) >= 10 and found[1].keys() == found[3].keys()
    for g, near in found[1].items():
        assert near.tolist() == found[3][g].tolist(), g

def repeated_corpus(seed: int, distinct: int, positions: int):
    """A corpus of `positions` unit vectors drawn from `distinct` ones (segments repeat), and which each is."""
    import pyarrow as pa
    import scipy.sparse as sp

    from services.interpreter.corpus import Corpus

    rng = np.random.default_rng(seed)
    base = rng.normal(size=(distinct, 8)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    which = rng.permutation(distinct) if positions == distinct else rng.integers(0, distinct, positions)
    vectors = base[which]
    corpus = Corpus(pa.array([f"t{w}" for w in which]), np.arange(positions), vectors,
                    sp.csc_matrix((positions, 4), dtype=np.float32))
    return corpus, which


@pytest.mark.parametrize("depth", [3, 512])  # 3: every list runs short (searched again over the distinct vectors)
def test_neighbours_of_repeated_segments_are_the_nearest_copies_in_position_order(depth):
    """Segments repeat (the same clause in many notes): the search runs over the distinct vectors and gives
    back their copies; the result is the brute-force one, nearest first and copies in position order."""
    corpus, which = repeated_corpus(seed=0, distinct=12, positions=200)
    vectors = corpus.vectors
    assert len(corpus.distinct.vectors) == 12
    active = np.flatnonzero(np.isin(which, [0, 5]))  # every copy of two texts activates
    anchors = np.array([int(np.flatnonzero(which == 0)[0]), int(np.flatnonzero(which == 5)[-1])])
    found = Neighbours(corpus, depth=depth, block=1)
    found.prefetch(anchors.tolist())
    m = 30
    got = found.rows(anchors, active, m)
    for a, row in zip(anchors.tolist(), got):
        sims = vectors @ vectors[a]
        free = np.setdiff1d(np.arange(200), active)
        want = free[np.lexsort((free, -sims[free]))][:m]
        assert row.tolist() == want.tolist()


@pytest.mark.parametrize("depth", [3, 512])
def test_past_the_pool_neighbours_are_the_nearest_copies_among_a_fixed_sample(monkeypatch, depth):
    """A corpus with more distinct vectors than SEARCHED: an anchor's neighbours are the brute-force nearest among the
    copies of one fixed sample of SEARCHED distinct vectors (the same for every search), and when that sample holds
    too few non-activating copies the search takes every distinct vector instead."""
    from services.interpreter import neighbours

    monkeypatch.setattr(neighbours, "SEARCHED", 20)
    corpus, which = repeated_corpus(seed=1, distinct=60, positions=300)
    vectors, distinct = corpus.vectors, corpus.distinct
    found = Neighbours(corpus, depth=depth, block=1)
    pool = found._pool
    assert pool is not None and len(pool) == 20 and pool.tolist() == Neighbours(corpus)._pool.tolist()
    in_pool = np.isin(distinct.group, pool)  # [300]: positions whose vector is in the sample
    active = np.flatnonzero(np.isin(which, [0, 5, 9]))
    anchors = np.array([int(np.flatnonzero(which == 0)[0]), int(np.flatnonzero(which == 9)[-1])])
    found.prefetch(anchors.tolist())
    free = np.setdiff1d(np.arange(300), active)
    sampled = free[in_pool[free]]
    m = min(12, len(sampled))
    for a, row in zip(anchors.tolist(), found.rows(anchors, active, m)):
        sims = vectors @ vectors[a]
        assert row.tolist() == sampled[np.lexsort((sampled, -sims[sampled]))][:m].tolist()
    # more non-activating rows asked than the sample holds: the nearest among every distinct vector's copies
    m = len(sampled) + 5
    for a, row in zip(anchors.tolist(), found.rows(anchors, active, m)):
        sims = vectors @ vectors[a]
        assert row.tolist() == free[np.lexsort((free, -sims[free]))][:m].tolist()


def test_the_searched_sample_is_made_once_per_corpus():
    """Every search of one corpus (the naming run's, each re-interpretation's) shares one sample, not a copy each."""
    corpus, _ = repeated_corpus(seed=2, distinct=50, positions=50)
    assert len(corpus.distinct.vectors) == 50 and corpus.distinct_sample(50) is None
    ids, sampled = corpus.distinct_sample(20)
    assert len(ids) == 20 and np.all(np.diff(ids) > 0)
    np.testing.assert_array_equal(sampled, corpus.distinct.vectors[ids])
    assert corpus.distinct_sample(20)[1] is sampled


@pytest.mark.parametrize("width,depth", [(50_000, 512), (3_000, 512), (1_500, 512), (600, 600), (20_000, 7)])
def test_largest_are_each_rows_largest_values_largest_first_equal_ones_by_column(width, depth):
    """neighbours.largest (only the values at or above a sampled bound partitioned) gives the first columns of a
    full sort by value, then column: rounded values repeat, banned columns are -inf, a row with few values above
    the bound (most of it banned) is read whole."""
    from services.interpreter.neighbours import largest

    rng = np.random.default_rng(width + depth)
    sims = np.round(rng.normal(size=(9, width)), 2).astype(np.float32)  # many equal values
    sims[1, ::2] = -np.inf
    sims[2, : width - depth] = -np.inf  # only depth values not banned
    sims[3, :] = 0.5  # every value equal
    sims[4, rng.choice(width, 3, replace=False)] = 9.0  # a few far above the rest
    got = largest(sims, depth)
    assert got.shape == (9, min(depth, width))
    for row, cols in zip(sims, got):
        np.testing.assert_array_equal(cols, np.lexsort((np.arange(width), -row))[:len(cols)])  # value down, column up


def test_neighbours_do_not_depend_on_the_anchors_that_share_their_block():
    """A float32 product's last bits depend on the block a row is computed in (its slot, the block's size): an
    anchor's list is the same alone, in a block of 64, at another slot, or with other anchors known before, so
    that a run's hard negatives do not depend on which process drew a group first. Near-equal neighbours
    (similarities within float32 rounding of each other) make any such dependence change the order."""
    import pyarrow as pa
    import scipy.sparse as sp

    from services.interpreter.corpus import Corpus

    rng = np.random.default_rng(7)
    d, n = 384, 3_000
    centre = rng.normal(size=d)
    vectors = centre + 2e-3 * rng.normal(size=(n, d))  # every similarity within ~1e-5 of the others
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    corpus = Corpus(pa.array([f"t{i}" for i in range(n)]), np.arange(n), vectors,
                    sp.csc_matrix((n, 4), dtype=np.float32))
    assert len(corpus.distinct.vectors) == n
    anchors = rng.choice(n, 200, replace=False).tolist()
    groups = corpus.distinct.group[anchors].tolist()  # the distinct vectors the lists are kept by
    lists = []
    for order, block in [(anchors, 64), (anchors[::-1], 64), (anchors[5:] + anchors[:5], 64), (anchors, 1),
                         (anchors, 13)]:
        found = Neighbours(corpus, depth=300, block=block)
        found.prefetch(order[:37])  # some known before the rest: the blocks of the second call differ
        found.prefetch(order)
        lists.append({g: found._near[g].tolist() for g in groups})
    for other in lists[1:]:
        assert other == lists[0]
    distinct = corpus.distinct.vectors.astype(np.float64)
    sims = distinct @ distinct[groups[0]]
    assert lists[0][groups[0]][:50] == np.lexsort((np.arange(n), -sims))[:50].tolist()  # nearest first, exactly
