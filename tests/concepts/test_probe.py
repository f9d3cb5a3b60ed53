"""The probe's numerics on cases with a known answer: a concept made of two features is found
by the L1 probe (those two carry the weight), metrics match hand counts, the split is fixed; the paired
bootstrap of an F1 difference against the definition (indices resampled)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import f1_score

from gateway.domain.concepts.probe import (
    binary_metrics, f1_difference, fit_probe, heldout_split, macro_f1, pr_curve, sigmoid, top_contributions,
)


def sparse_codes(n_docs: int, n: int, k: int, seed: int) -> sp.csr_matrix:
    """Random TopK-like codes: k features a row, positive activations."""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.choice(n, size=k, replace=False) for _ in range(n_docs)])
    acts = rng.exponential(1.0, (n_docs, k)).astype(np.float32) + 0.05
    rows = np.repeat(np.arange(n_docs), k)
    return sp.csr_matrix((acts.ravel(), (rows, idx.ravel())), shape=(n_docs, n))


def test_probe_finds_the_two_features_that_define_the_concept():
    rng = np.random.default_rng(1)
    dense = sparse_codes(3000, 256, 12, seed=0).toarray()
    # The concept, as "confirmed, not suspected": feature 3 fires in a fifth of the documents,
    # feature 7 in half of those; positive = 3 without 7.
    topic = rng.random(3000) < 0.2
    hedge = topic & (rng.random(3000) < 0.5)
    dense[:, 3] = np.where(topic, rng.exponential(1.0, 3000) + 0.3, 0)
    dense[:, 7] = np.where(hedge, rng.exponential(1.0, 3000) + 0.3, 0)
    x = sp.csr_matrix(dense.astype(np.float32))
    y = (topic & ~hedge).astype(int)
    split = heldout_split(y, test_fraction=0.25, seed=0)
    probe = fit_probe(x[split.train], y[split.train], seed=0)
    w = probe.coef[0]
    strongest = np.argsort(-np.abs(w))[:2]
    assert set(strongest.tolist()) == {3, 7}
    assert w[3] > 0 > w[7]
    assert (abs(w[3]) + abs(w[7])) / np.abs(w).sum() > 0.8  # the rest is small change
    assert len(probe.used_features) < 256 and (w == 0).sum() > 64  # L1: many weights exactly zero
    pred = probe.predict(x[split.test])
    m = binary_metrics(y[split.test], pred)
    assert m["f1"] > 0.9 and m["precision"] > 0.85 and m["recall"] > 0.85
    assert probe.C > 0 and 0 < probe.cv_score <= 1


def test_heldout_split_is_fixed_and_stratified():
    y = np.array([0] * 80 + [1] * 20)
    a, b = heldout_split(y, test_fraction=0.25, seed=3), heldout_split(y, test_fraction=0.25, seed=3)
    assert np.array_equal(a.test, b.test) and np.array_equal(a.train, b.train)
    assert len(a.test) == 25 and y[a.test].sum() == 5  # the positive share is kept
    assert not set(a.train) & set(a.test) and len(a.train) + len(a.test) == 100
    other = heldout_split(y, test_fraction=0.25, seed=4)
    assert not np.array_equal(a.test, other.test)


def test_binary_metrics_match_hand_counts():
    y_true = np.array([1, 1, 1, 0, 0, 0, 0, 1])
    y_pred = np.array([1, 0, 1, 1, 0, 0, 0, 0])
    m = binary_metrics(y_true, y_pred)
    assert m["confusion"] == {"tp": 2, "fp": 1, "fn": 2, "tn": 3}
    assert m["precision"] == pytest.approx(2 / 3, abs=1e-4) and m["recall"] == 0.5
    assert m["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5), abs=1e-4)
    assert binary_metrics(np.array([0, 0]), np.array([0, 0]))["f1"] == 0.0  # no positives: 0, not a crash


def test_pr_curve_is_thinned_and_ends_where_it_should():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 5000)
    scores = y + rng.normal(0, 0.8, 5000)
    curve = pr_curve(y, scores)
    assert len(curve["precision"]) == len(curve["recall"]) == len(curve["thresholds"]) <= 101
    assert curve["recall"][0] == 1.0 and curve["recall"][-1] == 0.0
    assert curve["recall"] == sorted(curve["recall"], reverse=True)
    assert 0.7 < curve["average_precision"] < 1
    perfect = pr_curve(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9]))
    assert perfect["average_precision"] == 1.0
    assert pr_curve(np.array([1, 1]), np.array([0.3, 0.4]))["average_precision"] is None


def test_multiclass_probe_and_macro_f1():
    x = sparse_codes(1500, 64, 6, seed=1)
    y = np.select([x[:, 1].toarray().ravel() > 0, x[:, 2].toarray().ravel() > 0], [1, 2], 0)
    noisy = np.random.default_rng(2).random(len(y)) < 0.05  # not perfectly separable, as real labels
    y[noisy] = (y[noisy] + 1) % 3
    probe = fit_probe(x, y, seed=0)
    assert probe.coef.shape == (3, 64) and probe.intercept.shape == (3,)
    assert np.argmax(probe.coef[1]) == 1 and np.argmax(probe.coef[2]) == 2  # one probe per class, its feature
    assert macro_f1(y, probe.predict(x)) > 0.85


def test_top_contributions_order_and_padding():
    rows = sp.csr_matrix(np.array([[0.5, 2.0, 0.0, 1.0], [0.0, 0.0, 3.0, 0.0]], dtype=np.float32))
    w = np.array([1.0, 1.0, -1.0, 4.0])
    out = top_contributions(rows, w, top=3)
    assert out.tolist() == [[3, 1, 0], [-1, -1, -1]]  # 4.0, 2.0, 0.5; a negative contribution is not a match
    assert sigmoid(np.array([0.0]))[0] == 0.5


def test_c_is_chosen_on_a_stratified_sample_and_the_probe_is_fitted_on_all(monkeypatch):
    from sklearn.linear_model import LogisticRegression

    import gateway.domain.concepts.probe as probe_mod

    monkeypatch.setattr(probe_mod, "CV_MAX_EXAMPLES", 400)
    x = sparse_codes(1000, 64, 8, seed=2)
    y = (x[:, 5].toarray().ravel() > 0).astype(int)
    xs, ys = probe_mod.cv_sample(x, y, seed=0)
    assert xs.shape[0] == len(ys) == 400 and abs(ys.mean() - y.mean()) < 0.01
    assert probe_mod.cv_sample(x[:300], y[:300], seed=0)[0].shape[0] == 300  # under the cap: all of them
    seen: list[int] = []
    real = LogisticRegression.fit

    def spy(self, X, Y, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202, N803
        seen.append(X.shape[0])
        return real(self, X, Y, *args, **kw)

    monkeypatch.setattr(LogisticRegression, "fit", spy)  # the class probe.py imports where it fits
    probe = fit_probe(x, y, seed=0)
    assert seen[-1] == 1000 and all(n <= 400 for n in seen[:-1])
    assert probe.coef[0, 5] > 0


def _naive_f1_difference(y, a, b, resamples, seed, paired=True):  # noqa: ANN001, ANN202
    """The definition: resample document indices, both methods on the same draw (`paired`; else each method on
    its own draw). All draws at once: sklearn's f1_score per draw was 10 s of this test; the first draws are
    checked against it."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(y), (resamples, len(y)))
    j = i if paired else rng.integers(0, len(y), (resamples, len(y)))

    def f1(truth, pred):  # noqa: ANN001, ANN202 - F1 of the positive class, per draw
        tp, fp = ((pred == 1) & (truth == 1)).sum(1), ((pred == 1) & (truth == 0)).sum(1)
        fn = ((pred == 0) & (truth == 1)).sum(1)
        return np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)

    diffs = f1(y[i], a[i]) - f1(y[j], b[j])
    for r in range(5):
        assert diffs[r] == pytest.approx(f1_score(y[i[r]], a[i[r]], zero_division=0)
                                         - f1_score(y[j[r]], b[j[r]], zero_division=0))
    return np.quantile(diffs, [0.025, 0.975])


def test_f1_difference_is_a_paired_bootstrap():
    rng = np.random.default_rng(3)
    y = (rng.random(594) < 0.8).astype(np.int64)  # NegEx's held-out size and share
    a = np.where(rng.random(594) < 0.975, y, 1 - y)
    b = np.where(rng.random(594) < 0.985, y, 1 - y)
    got = f1_difference(y, a, b, resamples=4000, seed=0)
    assert got["difference"] == pytest.approx(f1_score(y, a) - f1_score(y, b), abs=1e-4)
    low, high = _naive_f1_difference(y, a, b, 2000, seed=1)
    # the same distribution drawn two ways: the interval ends agree to the bootstraps' own noise
    assert got["low"] == pytest.approx(low, abs=0.003) and got["high"] == pytest.approx(high, abs=0.003)
    assert got["low"] <= got["difference"] <= got["high"] and got["level"] == 0.95
    assert got["distinguishable"] == (got["low"] > 0 or got["high"] < 0)
    assert f1_difference(y, a, b, resamples=4000, seed=0) == got  # seeded: the page shows the same figures again

    # Two methods that agree on most documents, as a concept and its words baseline do: b fixes 5 of a's 14
    # errors and makes none. Paired, that is a lead; resampling the methods apart would call it noise.
    fixed = a.copy()
    wrong = np.flatnonzero(a != y)
    fixed[wrong[:5]] = y[wrong[:5]]
    lead = f1_difference(y, a, fixed, resamples=4000, seed=0)
    low, high = _naive_f1_difference(y, a, fixed, 2000, seed=1)
    assert lead["low"] == pytest.approx(low, abs=0.002) and lead["high"] == pytest.approx(high, abs=0.002)
    assert lead["distinguishable"] and lead["high"] < 0
    apart = _naive_f1_difference(y, a, fixed, 2000, seed=1, paired=False)
    assert apart[0] < 0 < apart[1], apart  # the case tells paired from unpaired


def test_f1_difference_tells_a_real_lead_from_noise():
    rng = np.random.default_rng(4)
    y = (rng.random(500) < 0.1).astype(np.int64)
    same = f1_difference(y, y, y)
    assert same["difference"] == same["low"] == same["high"] == 0.0 and not same["distinguishable"]
    weak = np.where(rng.random(500) < 0.7, y, 1 - y)  # wrong on 30 %: F1 far below
    lead = f1_difference(y, y, weak)
    assert lead["distinguishable"] and lead["low"] > 0.3
    assert f1_difference(y, weak, y)["high"] < -0.3  # the other way round
    one_error = y.copy()
    one_error[np.flatnonzero(y)[0]] = 0  # a single miss: not more than the noise of 500 documents
    assert not f1_difference(y, one_error, y)["distinguishable"]


def test_the_probe_s_strength_and_weights_never_read_the_held_out_split() -> None:
    """Scrambling the held-out notes' codes changes the held-out figures and nothing the probe learned: its C is
    chosen by cross-validation on the training split alone (a leak of the held-out rows into the choice of C, or
    into the fit, fails this)."""
    import numpy as np
    import scipy.sparse as sp

    from contracts.concepts import Examples
    from gateway.domain.concepts.examples import Labelled
    from gateway.domain.concepts.service import train_probe
    from tests.concepts.conftest import known_codes

    codes, labels = known_codes()
    y = np.array([lab == "bronchiolitis:confirmed" for lab in labels], dtype=np.int8)
    labelled = Labelled(np.arange(len(y), dtype=np.int64), y, 0)
    examples = Examples(documents={"positive": [1], "negative": [2]})  # only the split's fraction and seed are read
    probe, metrics = train_probe(codes, labelled, examples)
    test = labelled.split(examples).test
    dense = codes.toarray()
    dense[test] = np.random.default_rng(1).permutation(dense[test].ravel()).reshape(dense[test].shape)
    probe_scrambled, metrics_scrambled = train_probe(sp.csr_matrix(dense), labelled, examples)
    assert probe_scrambled["C"] == probe["C"] and probe_scrambled["weights"] == probe["weights"]
    assert probe_scrambled["intercept"] == probe["intercept"] and probe_scrambled["cv_f1"] == probe["cv_f1"]
    assert metrics_scrambled["f1"] != metrics["f1"]  # what is scored on the held-out split did change
