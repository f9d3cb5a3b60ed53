"""The labelling queue's policy and the readout, without a database: the seed's hits and near misses first, then
the probe's uncertain notes spread over the features, a random share that is uniform, no labelled note twice;
the readout's estimate from its own folds."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.domain.concepts.probe import positive
from gateway.domain.concepts.readout import f1_interval, f1_of, fit_readout, normalise_rows
from gateway.domain.labels.policy import QueuePolicy, kmeans_pp, most_uncertain, plan_batch, split_batch


def test_batch_shares() -> None:
    assert split_batch(10, QueuePolicy()) == (5, 5)
    assert split_batch(10, QueuePolicy(random_share=0.2)) == (8, 2)
    assert split_batch(2, QueuePolicy()) == (1, 1)
    assert split_batch(1, QueuePolicy()) == (1, 0)
    assert split_batch(10, QueuePolicy(random_share=0.0)) == (10, 0)


def test_seed_hits_then_near_misses_then_random_never_a_closed_note() -> None:
    open_ = np.ones(100, dtype=bool)
    open_[[3, 50, 51]] = False  # labelled, or leased to someone else
    hits, near = np.array([3, 4, 5, 6, 7, 8, 9, 10, 11]), np.array([50, 51, 52, 53, 54])
    picks = plan_batch(10, open_=open_, rng=np.random.default_rng(0), policy=QueuePolicy(random_share=0.2),
                       seed_hits=hits, seed_near=near)
    by_reason = {r: [p.position for p in picks if p.reason == r] for r in ("seed", "near_miss", "random")}
    assert len(by_reason["random"]) == 2  # drawn first, from every open note
    best = [h for h in hits.tolist() if open_[h] and h not in by_reason["random"]]
    assert by_reason["seed"] == best[:6]  # the best open hits, in order
    assert by_reason["near_miss"] == [p for p in near.tolist() if open_[p] and p not in by_reason["random"]][:2]
    positions = [p.position for p in picks]
    assert len(set(positions)) == 10 and all(open_[positions])


def test_without_a_seed_or_a_probe_the_batch_is_random_and_stops_at_the_open_notes() -> None:
    open_ = np.zeros(50, dtype=bool)
    open_[:7] = True
    picks = plan_batch(10, open_=open_, rng=np.random.default_rng(1))
    assert sorted(p.position for p in picks) == list(range(7)) and {p.reason for p in picks} == {"random"}


def test_random_share_is_uniform_over_the_open_notes() -> None:
    from scipy.stats import chisquare

    n, draws = 40, 2000
    rng = np.random.default_rng(2)
    codes = sp.random(n, 16, density=0.3, random_state=3, format="csr")
    probability = np.linspace(0.01, 0.99, n)  # the uncertain ones are near the middle
    open_ = np.ones(n, dtype=bool)
    open_[:5] = False
    counts = np.zeros(n)
    for _ in range(draws):
        picks = plan_batch(10, open_=open_, rng=rng, policy=QueuePolicy(random_share=0.2), probability=probability,
                           codes=codes)
        for p in picks:
            counts[p.position] += p.reason == "random"
    assert counts[:5].sum() == 0
    assert chisquare(counts[5:]).pvalue > 1e-3  # uniform over the 35 open notes, uncertain or not
    assert counts[5:].sum() == 2 * draws


def test_uncertain_picks_are_spread_not_ten_copies_of_one_template() -> None:
    template = np.zeros((20, 8))
    template[:, 0] = 1.0  # twenty notes of one template
    others = np.eye(8)[1:] + 0.05  # seven distinct notes
    codes = sp.csr_matrix(np.vstack([template, others]))
    probability = np.r_[np.full(20, 0.5), np.full(7, 0.45)]  # the template is the most uncertain
    picks = plan_batch(8, open_=np.ones(27, dtype=bool), rng=np.random.default_rng(0),
                       policy=QueuePolicy(random_share=0.0, pool=10), probability=probability, codes=codes)
    chosen = [p.position for p in picks]
    assert chosen[0] < 20  # the most uncertain first
    assert sum(p < 20 for p in chosen) <= 2 and {p.reason for p in picks} == {"uncertain"}


def test_kmeans_pp_picks_distinct_rows_first() -> None:
    rows = normalise_rows(sp.csr_matrix(np.vstack([np.eye(4), np.eye(4)])))
    assert sorted(np.array(kmeans_pp(rows, 4, np.random.default_rng(0))) % 4) == [0, 1, 2, 3]


@pytest.mark.parametrize("n", [12, 60])
def test_readout_estimate_is_its_out_of_fold_f1(n: int) -> None:
    rng = np.random.default_rng(n)
    y = np.r_[np.ones(n // 2), np.zeros(n - n // 2)].astype(np.int64)
    dense = rng.exponential(1.0, (n, 20)) * (rng.random((n, 20)) < 0.3)
    dense[:, 0] += y * 2.0  # one feature carries the class
    fitted = fit_readout(sp.csr_matrix(dense), y)
    assert fitted.out_of_fold is not None and fitted.folds == min(5, n // 2)
    assert fitted.probe.cv_score == pytest.approx(f1_of(y, positive(fitted.out_of_fold)))
    assert fitted.probe.cv_score == max(fitted.tried.values())
    assert fitted.readout in ("row_l2", "l1") and fitted.probe.coef[0, 0] == fitted.probe.coef[0].max()


def test_cross_validation_calls_a_note_at_p_one_half_positive_as_the_product_does() -> None:
    # C so small that the L1 penalty takes every weight and the intercept to 0: every note gets P = 0.5 exactly,
    # which classify, apply and the estimate call positive; the F1 that chooses the readout must say the same
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(15), np.zeros(35)].astype(np.int64)
    codes = sp.csr_matrix(rng.exponential(1.0, (50, 6)) * (rng.random((50, 6)) < 0.3))
    fitted = fit_readout(codes, y, readouts={"l1": (1e-4,)})
    assert fitted.probe.intercept[0] == 0 and not fitted.probe.coef.any() and not fitted.out_of_fold.any()
    assert (fitted.probability(codes) == 0.5).all()
    assert fitted.probe.cv_score == pytest.approx(f1_of(y, np.ones(50, np.int64))) == pytest.approx(2 * 15 / 65)
    assert positive(np.array([-1e-9, 0.0, 1e-9])).tolist() == [0, 1, 1]


def test_many_labels_score_the_candidates_on_one_fold_then_fit_on_all() -> None:
    from sklearn.model_selection import StratifiedKFold

    from gateway.domain.concepts.readout import _fit, rows_for

    rng = np.random.default_rng(5)
    n = 900
    y = (rng.random(n) < 0.2).astype(np.int64)
    dense = rng.exponential(1.0, (n, 12)) * (rng.random((n, 12)) < 0.3)
    dense[:, 0] += y * 1.5
    codes = sp.csr_matrix(dense)
    capped = fit_readout(codes, y, seed=4, cv_max=300)
    train, fold = next(StratifiedKFold(3, shuffle=True, random_state=4).split(np.zeros(n), y))
    assert capped.cv_rows.tolist() == sorted(fold.tolist()) and len(capped.out_of_fold) == len(fold)
    x = rows_for(capped.readout, codes)
    on_rest = _fit(x[train], y[train], capped.readout, capped.probe.C, 4)  # fitted once, on the other folds
    np.testing.assert_allclose(capped.out_of_fold, on_rest.decision_function(x[np.sort(fold)]))
    assert capped.probe.cv_score == pytest.approx(f1_of(y[np.sort(fold)], positive(capped.out_of_fold)))
    assert round(capped.probe.cv_score, 4) == max(capped.tried.values())
    np.testing.assert_array_equal(capped.probe.coef, _fit(x, y, capped.readout, capped.probe.C, 4).coef_)  # on all
    uncapped = fit_readout(codes, y, seed=4, cv_max=n)  # no more labels than the cap: every fold
    assert uncapped.cv_rows is None and len(uncapped.out_of_fold) == n and uncapped.folds == 3


def test_the_most_uncertain_pool_breaks_ties_by_position() -> None:
    # notes whose used features are all zero share one P: the pool must not depend on how a SIMD sort orders them
    rng = np.random.default_rng(0)
    candidates = np.sort(rng.choice(1000, 300, replace=False))
    margin = rng.choice([0.0, 0.1, 0.25, 0.4], 300)
    for keep in (1, 30, 75, 150, 299, 300):
        expected = candidates[np.lexsort((candidates, margin))][:keep]
        assert most_uncertain(candidates, margin, keep).tolist() == expected.tolist(), keep


def test_readout_with_one_label_of_a_class_fits_without_an_estimate() -> None:
    fitted = fit_readout(sp.csr_matrix(np.eye(5)), np.array([1, 0, 0, 0, 0]))
    assert fitted.out_of_fold is None and fitted.folds == 0


def test_f1_interval_contains_the_point_and_narrows_with_more_notes() -> None:
    rng = np.random.default_rng(0)
    y = rng.random(2000) < 0.3
    pred = np.where(rng.random(2000) < 0.85, y, ~y)
    small, large = f1_interval(y[:60], pred[:60]), f1_interval(y, pred)
    assert small["low"] <= small["f1"] <= small["high"] and large["low"] <= large["f1"] <= large["high"]
    assert large["high"] - large["low"] < small["high"] - small["low"]


def test_assisted_f1_is_unbiased_with_a_miscalibrated_model_and_narrower_with_a_good_one() -> None:
    """Over a pool of 5,000 notes whose true F1 is known, F1 estimated from 40 random labels and the model's P over
    the pool averages to the truth even when P is miscalibrated; with a calibrated P its spread is smaller than
    the plain F1 of the 40."""
    from gateway.domain.concepts.readout import assisted_f1

    rng = np.random.default_rng(0)
    truth_p = rng.beta(0.6, 1.4, 5000)  # each note's chance of being positive
    y_pool = rng.random(5000) < truth_p
    for p_model, label in ((np.clip(truth_p * 1.6, 0, 1), "miscalibrated"), (truth_p, "calibrated")):
        pred = p_model >= 0.5
        true_f1 = f1_of(y_pool.astype(int), pred.astype(int))
        assisted, plain = [], []
        for _ in range(400):
            s = rng.choice(5000, 40, replace=False)
            assisted.append(assisted_f1(p_model, y_pool[s], p_model[s], resamples=10)["f1"])
            plain.append(f1_of(y_pool[s].astype(int), pred[s].astype(int)))
        assert abs(np.mean(assisted) - true_f1) < 0.02, label
        if label == "calibrated":
            assert np.std(assisted) < 0.8 * np.std(plain)
