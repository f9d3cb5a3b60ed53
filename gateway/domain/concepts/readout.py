"""How a probe reads the SAE's codes when labels are few: the labelling loop's readout (no database, no HTTP).

Rows are L2-normalised (a note's codes are read as a direction, not a magnitude: a long note's sums do not
outvote a short one's) and an L2 logistic regression, classes weighted to balance, reads them; C is chosen by
stratified k-fold cross-validation on the training labels only, and the same folds' out-of-fold decisions give
the estimate of F1 that the concept page shows (nothing held out is spent on it). On real clinical cases with
few labels this readout beats the L1 probe's and TF-IDF's (bench/labelling.py, bench/results/labelling.json);
the features that carry it are its largest positive weights, named.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from gateway.domain.concepts.probe import FittedProbe

READOUT_CS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
READOUT_FOLDS = 5
MIN_FOR_CV = 2  # each class at least this many labels for a cross-validated C; fewer: C = 1 and no estimate
INTERVAL_RESAMPLES = 2000


def normalise_rows(codes: sp.csr_matrix) -> sp.csr_matrix:
    """Each row at unit L2 norm (empty rows stay empty): float64 [rows, n]."""
    x = sp.csr_matrix(codes, dtype=np.float64)
    norms = np.sqrt(np.asarray(x.multiply(x).sum(1)).ravel())
    return sp.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ x


class Readout(NamedTuple):
    """A fitted readout and what its cross-validation saw."""

    probe: FittedProbe  # coef [1, n] over normalised rows
    out_of_fold: np.ndarray | None  # float64 [labels]: each label's decision by a fit that did not see it; None: no CV
    folds: int


def _fit(x: sp.csr_matrix, y: np.ndarray, c: float, seed: int) -> Any:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=c, l1_ratio=0.0, solver="liblinear", class_weight="balanced", max_iter=500,
                                  random_state=seed).fit(x, y)


def f1_of(y: np.ndarray, pred: np.ndarray) -> float:
    tp = int(np.sum((pred == 1) & (y == 1)))
    denominator = 2 * tp + int(np.sum((pred == 1) & (y == 0))) + int(np.sum((pred == 0) & (y == 1)))
    return 2 * tp / denominator if denominator else 0.0


def fit_readout(codes: sp.csr_matrix, y: np.ndarray, *, seed: int = 0, cs: tuple[float, ...] = READOUT_CS) -> Readout:
    """Fit on rows `codes` [labels, n] with classes `y` in {0, 1}. C maximises the pooled out-of-fold F1 over
    stratified folds of these labels only (ties: the smaller C); the model is then refitted on all of them."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y, dtype=np.int64)
    x = normalise_rows(codes)
    smallest = int(np.bincount(y, minlength=2).min())
    if smallest < MIN_FOR_CV:
        model = _fit(x, y, 1.0, seed)
        return Readout(_fitted(model, 1.0, float("nan")), None, 0)
    folds = min(READOUT_FOLDS, smallest)
    oof = np.zeros((len(cs), len(y)))
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y):
        for i, c in enumerate(cs):
            oof[i, test] = _fit(x[train], y[train], c, seed).decision_function(x[test])
    scores = [f1_of(y, (row > 0).astype(np.int64)) for row in oof]
    best = int(np.argmax(scores))
    model = _fit(x, y, cs[best], seed)
    return Readout(_fitted(model, cs[best], scores[best]), oof[best], folds)


def _fitted(model: Any, c: float, cv_score: float) -> FittedProbe:
    return FittedProbe(model.coef_.astype(np.float64), model.intercept_.astype(np.float64), model.classes_, c,
                       cv_score, True)


def readout_probability(coef: np.ndarray, intercept: float, codes: sp.csr_matrix) -> np.ndarray:
    """P(positive) [rows] of a readout with weights `coef` [n] over normalised rows."""
    z = np.asarray(normalise_rows(codes) @ coef).ravel() + intercept
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
