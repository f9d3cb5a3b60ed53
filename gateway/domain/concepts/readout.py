"""How a probe reads the SAE's codes when labels come one by one: the labelling loop's readout (no database, no
HTTP).

Two readouts compete on the labels by stratified k-fold cross-validation (the labels only; nothing held out is
spent on it): rows at unit L2 norm read by an L2 logistic regression (a note's codes as a direction: many weak
features add up, what real clinical cases with few labels need), and the raw codes read by an L1 logistic
regression (a few features decide, as on a template's one word). Classes are weighted to balance. The same
folds' out-of-fold decisions give the estimate of F1 that the concept page shows. The features that carry the
probe are its largest positive weights, named. Figures: bench/labelling.py, bench/results/labelling.json.

A concept made from a label column can hold hundreds of thousands of labels: past READOUT_CV_MAX (`cv_max`), the
candidates are scored on one of the folds only (a third of the labels, tens of thousands: a precise F1), each
fitted once on the rest, a third of the fits of every fold. A stratified sample of 20,000 labels for the folds
would be faster still but chooses for the sample's size: on 150,000 synthetic labels it picked the L1 readout
where every fold and the single fold pick row_l2, 0.015 lower held-out F1.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from gateway.domain.concepts.probe import FittedProbe, positive

READOUTS: dict[str, tuple[float, ...]] = {
    "row_l2": (0.1, 0.3, 1.0, 3.0, 10.0, 30.0),  # rows at unit norm, L2 penalty: reads many weak features
    "l1": (0.3, 1.0, 3.0, 10.0, 30.0),  # raw codes, L1 penalty: a few features decide (a template's one word)
}
"""The candidates and their C grids, in the order a tie is resolved."""
READOUT_FOLDS = 5
MANY_LABELS, FEW_FOLDS = 400, 3  # from this many labels, 3 folds: each still trains on hundreds, retraining halves
INTERVAL_RESAMPLES = 2000
READOUT_CV_MAX = 20_000  # past this many labels, a caller that caps it (a concept's examples) scores on one fold
MIN_FOR_CV = 2  # each class at least this many labels for a cross-validated choice; fewer: row_l2, C = 1, no estimate


def normalise_rows(codes: sp.csr_matrix) -> sp.csr_matrix:
    """Each row at unit L2 norm (empty rows stay empty): float64 [rows, n]."""
    x = sp.csr_matrix(codes, dtype=np.float64)
    norms = np.sqrt(np.asarray(x.multiply(x).sum(1)).ravel())
    return sp.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ x


def rows_for(readout: str, codes: sp.csr_matrix) -> sp.csr_matrix:
    """What a readout reads: unit-norm rows (row_l2) or the codes as they are (l1)."""
    return normalise_rows(codes) if readout == "row_l2" else sp.csr_matrix(codes, dtype=np.float64)


class Readout(NamedTuple):
    """A fitted readout and what its cross-validation saw."""

    probe: FittedProbe  # coef [1, n] over the rows `rows_for(readout, codes)`
    readout: str  # a key of READOUTS
    out_of_fold: np.ndarray | None  # float64 [labels]: each label's decision by a fit that did not see it; None: no CV
    folds: int
    tried: dict[str, float]  # "readout C" -> pooled out-of-fold F1
    cv_rows: np.ndarray | None = None  # indices of the labels the CV read (`out_of_fold`'s rows); None: every label

    def probability(self, codes: sp.csr_matrix) -> np.ndarray:
        """P(positive) [rows] of codes [rows, n], read as this readout reads them."""
        return readout_probability(self.probe.coef[0], float(self.probe.intercept[0]), codes, self.readout)


def _fit(x: sp.csr_matrix, y: np.ndarray, readout: str, c: float, seed: int) -> Any:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=c, l1_ratio=1.0 if readout == "l1" else 0.0, solver="liblinear",
                                  class_weight="balanced", max_iter=500, random_state=seed).fit(x, y)


def f1_of(y: np.ndarray, pred: np.ndarray) -> float:
    tp = int(np.sum((pred == 1) & (y == 1)))
    denominator = 2 * tp + int(np.sum((pred == 1) & (y == 0))) + int(np.sum((pred == 0) & (y == 1)))
    return 2 * tp / denominator if denominator else 0.0


def fit_readout(codes: sp.csr_matrix, y: np.ndarray, *, seed: int = 0,
                readouts: dict[str, tuple[float, ...]] = READOUTS, cv_max: int | None = None) -> Readout:
    """Fit on rows `codes` [labels, n] with classes `y` in {0, 1}. The readout and its C maximise the pooled
    out-of-fold F1 over stratified folds of these labels only (ties: the first readout, the smaller C); the model
    is then refitted on all of them. With more than `cv_max` labels, one fold only: each candidate fitted once, on
    the other folds, and scored on it (`out_of_fold` and the CV score are then that fold's, `cv_rows` its labels)."""
    y = np.asarray(y, dtype=np.int64)
    first = next(iter(readouts))
    smallest = int(np.bincount(y, minlength=2).min())
    if smallest < MIN_FOR_CV:
        model = _fit(rows_for(first, codes), y, first, 1.0, seed)
        return Readout(_fitted(model, 1.0, float("nan")), first, None, 0, {})
    folds = min(READOUT_FOLDS if len(y) < MANY_LABELS else FEW_FOLDS, smallest)
    score, readout, c, oof, tried, rows = _choose(codes, y, seed, readouts, folds,
                                                  one_split=cv_max is not None and len(y) > cv_max)
    model = _fit(rows_for(readout, codes), y, readout, c, seed)
    return Readout(_fitted(model, c, score), readout, oof, folds, tried, rows)


def _choose(codes: sp.csr_matrix, y: np.ndarray, seed: int, readouts: dict[str, tuple[float, ...]], folds: int, *,
            one_split: bool) -> tuple[float, str, float, np.ndarray, dict[str, float], np.ndarray | None]:
    """(pooled out-of-fold F1, readout, C, out-of-fold decisions, every candidate's F1, the rows those decisions are
    of: None for all): the best candidate by stratified `folds`-fold cross-validation on these labels;
    `one_split`: the first fold's split only."""
    from sklearn.model_selection import StratifiedKFold

    splits = list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))
    rows = np.sort(splits[0][1]) if one_split else None
    splits = splits[:1] if one_split else splits
    best: tuple[float, str, float, np.ndarray] | None = None
    tried: dict[str, float] = {}
    for readout, cs in readouts.items():
        x = rows_for(readout, codes)
        for c in cs:
            oof = np.zeros(len(y))
            for train, test in splits:
                oof[test] = _fit(x[train], y[train], readout, c, seed).decision_function(x[test])
            if rows is not None:
                oof = oof[rows]
            score = f1_of(y if rows is None else y[rows], positive(oof))
            tried[f"{readout} {c:g}"] = round(score, 4)
            if best is None or score > best[0]:
                best = (score, readout, c, oof)
    assert best is not None
    return (*best, tried, rows)


HOLDOUT_GROUPS = 10


def left_out_decisions(codes: sp.csr_matrix, y: np.ndarray, rows: np.ndarray, *, readout: str, c: float,
                       seed: int = 0, groups: int = HOLDOUT_GROUPS) -> np.ndarray:
    """float64 [len(rows)]: the decision on each of `rows` (indices into the labels) of the readout fitted, at its
    chosen C, on every label but a tenth of `rows` (the group holding it). Leaving out only a few labels at a time,
    each decision comes from a model nearly the final one: the queue's random share read this way estimates the
    final probe's F1 without the pessimism of k-fold, whose folds drop a fifth of the most informative labels."""
    y = np.asarray(y, dtype=np.int64)
    x = rows_for(readout, codes)
    out = np.zeros(len(rows))
    order = np.random.default_rng(seed).permutation(len(rows))
    groups = groups if len(y) < MANY_LABELS else groups // 2
    for group in np.array_split(order, min(groups, len(rows))):
        keep = np.ones(len(y), dtype=bool)
        keep[rows[group]] = False
        if len(np.unique(y[keep])) < 2:
            continue
        out[group] = _fit(x[keep], y[keep], readout, c, seed).decision_function(x[rows[group]])
    return out


def _fitted(model: Any, c: float, cv_score: float) -> FittedProbe:
    return FittedProbe(model.coef_.astype(np.float64), model.intercept_.astype(np.float64), model.classes_, c,
                       cv_score, True)


def readout_probability(coef: np.ndarray, intercept: float, codes: sp.csr_matrix, readout: str) -> np.ndarray:
    """P(positive) [rows] of a readout with weights `coef` [n] over the rows it reads."""
    z = np.asarray(rows_for(readout, codes) @ coef).ravel() + intercept
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def f1_interval(y: np.ndarray, pred: np.ndarray, *, level: float = 0.95, seed: int = 0,
                resamples: int = INTERVAL_RESAMPLES) -> dict[str, Any]:
    """F1 of `pred` against `y` with a bootstrap percentile interval (documents resampled: a multinomial draw of
    the four confusion cells, the same distribution as resampling indices)."""
    y, pred = np.asarray(y, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    n = len(y)
    point = f1_of(y, pred)
    if n == 0:
        return {"f1": 0.0, "low": 0.0, "high": 0.0, "n": 0, "level": level}
    cells = np.bincount(2 * y + pred, minlength=4).astype(np.float64)  # tn, fp, fn, tp
    draws = np.random.default_rng(seed).multinomial(n, cells / n, size=resamples).astype(np.float64)
    denominator = 2 * draws[:, 3] + draws[:, 1] + draws[:, 2]
    f1s = np.divide(2 * draws[:, 3], denominator, out=np.zeros(resamples), where=denominator > 0)
    low, high = np.quantile(f1s, [(1 - level) / 2, (1 + level) / 2])
    return {"f1": round(point, 4), "low": round(float(low), 4), "high": round(float(high), 4), "n": n,
            "level": level}


def assisted_f1(pool_p: np.ndarray, y: np.ndarray, p: np.ndarray, *, level: float = 0.95, seed: int = 0,
                resamples: int = INTERVAL_RESAMPLES) -> dict[str, Any]:
    """F1 of the decisions P >= 0.5 over a pool of unlabelled notes, estimated from a uniform random sample of
    labelled ones (prediction-powered inference, Angelopoulos et al., 2023): the share predicted positive is read
    off the whole pool; the true positives and the prevalence are the model's own expectation over the pool plus
    the mean error of that expectation on the random sample (`y` [r], `p` [r]: P from models that did not see
    them), which keeps them unbiased while the pool lowers their variance. Interval: the random sample
    bootstrapped, the pool held fixed."""
    pool_p, y, p = np.asarray(pool_p, float), np.asarray(y, float), np.asarray(p, float)
    pool_pred, pred = (pool_p >= 0.5).astype(float), (p >= 0.5).astype(float)
    predicted, tp_pool, prev_pool = pool_pred.mean(), (pool_pred * pool_p).mean(), pool_p.mean()

    def f1(idx: np.ndarray) -> np.ndarray:  # idx [R, r]: resamples of the random sample
        tp = tp_pool + (pred[idx] * (y[idx] - p[idx])).mean(1)
        prev = prev_pool + (y[idx] - p[idx]).mean(1)
        return np.clip(np.divide(2 * tp, predicted + prev, out=np.zeros(len(idx)), where=predicted + prev > 0), 0, 1)

    point = float(f1(np.arange(len(y))[None, :])[0])
    draws = f1(np.random.default_rng(seed).integers(0, len(y), (resamples, len(y))))
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return {"f1": round(point, 4), "low": round(float(low), 4), "high": round(float(high), 4), "n": len(y),
            "level": level}
