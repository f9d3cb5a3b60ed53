"""Sparse probes and held-out metrics: the numerics of concepts (no database, no HTTP).

A probe is an L1-regularised logistic regression on the SAE's sparse codes (CSR rows, one per
document): the L1 penalty leaves most weights at exactly zero, so the probe reads as a short
list of named features. Its C is chosen by stratified cross-validation on the training split
only; every figure reported is on the held-out split, which the probe never saw.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

# scikit-learn is imported where it is used: importing it took 0.75 s of every gateway start (`prisma serve`,
# each of the test suite's servers), which needs it only once a concept is made or read.

# The C grid: from a handful of features to lightly regularised. Larger C buys nothing the
# one-standard-error rule would pick, and liblinear crawls there on separable classes.
CS = np.logspace(-2, 2, 9)
CV_FOLDS = 5
CV_MAX_EXAMPLES = 20_000
"""C is chosen by CV on a stratified sample of at most this many examples; the probe is then fitted
on all of them. On 200,000 demo notes (bench/e2e.py, 150,000 training documents) the 45 CV fits on
all of them took 539 s in the request (with a profile running beside it); on 20,000 the fit took 91 s,
chose the same C (31.6) and gave the same held-out F1 (0.8632, 5,777 features)."""
PR_POINTS = 101  # the stored precision-recall curve is thinned to at most this many points


def positive(decision: np.ndarray) -> np.ndarray:
    """int64: 1 where w·x + b >= 0, which is P(positive) >= 0.5, the rule the product decides by (classify, apply,
    a probe's threshold 0.5). Cross-validation scores the same rule: a note at exactly 0 (its features all zero
    under a probe whose L1 penalty took the intercept to 0) counts positive in both."""
    return (np.asarray(decision) >= 0).astype(np.int64)


class Split(NamedTuple):
    """Indices into the labelled rows (not dataset positions)."""

    train: np.ndarray  # int64 [n_train]
    test: np.ndarray  # int64 [n_test]


def heldout_split(y: np.ndarray, *, test_fraction: float, seed: int) -> Split:
    """A stratified split, the same for the same labels, fraction and seed."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=test_fraction, random_state=seed, stratify=y)
    return Split(np.sort(train), np.sort(test))


class FittedProbe(NamedTuple):
    """A fitted probe: weights [n_features] for class 1 (binary) or [classes, n_features]."""

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    C: float  # chosen by CV (the mean over the classes' probes for more than two classes)
    cv_score: float  # mean cross-validated F1 at the chosen C
    converged: bool

    def decision(self, x: sp.csr_matrix) -> np.ndarray:
        """w·x + b: [docs] for a binary probe, [docs, classes] otherwise."""
        scores = np.asarray(x @ self.coef.T) + self.intercept
        return scores[:, 0] if self.coef.shape[0] == 1 else scores

    def predict(self, x: sp.csr_matrix) -> np.ndarray:
        d = self.decision(x)
        return self.classes[positive(d)] if d.ndim == 1 else self.classes[d.argmax(1)]

    @property
    def used_features(self) -> np.ndarray:
        """Feature indices with a non-zero weight for any class."""
        return np.flatnonzero(np.abs(self.coef).sum(0))


def cv_sample(x: sp.csr_matrix, y: np.ndarray, *, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """At most CV_MAX_EXAMPLES rows, stratified by y (seeded); all of them when fewer."""
    from sklearn.model_selection import train_test_split

    if len(y) <= CV_MAX_EXAMPLES:
        return x, y
    keep, _ = train_test_split(np.arange(len(y)), train_size=CV_MAX_EXAMPLES, stratify=y, random_state=seed)
    keep = np.sort(keep)
    return x[keep], y[keep]


def _fit_binary(x: sp.csr_matrix, y: np.ndarray, *, seed: int, cs: np.ndarray, max_iter: int,
                one_se: bool) -> tuple[LogisticRegression, float, float, bool]:
    """(model, C, mean CV F1 at C, converged) for y in {0, 1}."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    x_cv, y_cv = cv_sample(x, y, seed=seed)
    folds = max(min(CV_FOLDS, int(np.bincount(y_cv).min())), 2)
    cv = LogisticRegressionCV(
        Cs=cs, l1_ratios=(1.0,), solver="liblinear", class_weight="balanced", max_iter=max_iter, scoring="f1",
        cv=StratifiedKFold(folds, shuffle=True, random_state=seed), random_state=seed, refit=False,
        use_legacy_attributes=False,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        cv.fit(x_cv, y_cv)
        scores = np.asarray(cv.scores_).reshape(-1, len(cv.Cs_))  # [folds, Cs], Cs ascending
        mean, se = scores.mean(0), scores.std(0, ddof=1) / np.sqrt(scores.shape[0])
        best = int(np.argmax(mean))
        chosen = int(np.flatnonzero(mean >= mean[best] - se[best])[0]) if one_se else best
        c = float(cv.Cs_[chosen])
        model = LogisticRegression(C=c, l1_ratio=1.0, solver="liblinear", class_weight="balanced",
                                   max_iter=max_iter, random_state=seed).fit(x, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return model, c, float(mean[chosen]), converged


def fit_probe(x: sp.csr_matrix, y: np.ndarray, *, seed: int, cs: np.ndarray = CS, max_iter: int = 500,
              one_se: bool = True) -> FittedProbe:
    """L1 logistic regression (liblinear: exact L1, fast on sparse rows), classes weighted to
    balance, C by stratified k-fold CV on F1.

    C is the smallest whose mean CV score is within one standard error of the best (the
    "one-standard-error rule", Hastie et al., ESL 7.10): as good as the best within noise, with
    fewer features, which is what makes a probe readable (`one_se=False`: the best C). More than two classes: one probe per
    class against the rest (each its own C), as a concept per class would be; the class is the
    one with the largest decision value. A fit that does not converge is kept and flagged.
    """
    classes = np.unique(y)
    targets = [y == classes[1]] if len(classes) == 2 else [y == c for c in classes]
    fits = [_fit_binary(x, t.astype(np.int8), seed=seed, cs=cs, max_iter=max_iter, one_se=one_se) for t in targets]
    coef = np.vstack([m.coef_ for m, *_ in fits]).astype(np.float64)  # [1 or classes, n]
    intercept = np.concatenate([m.intercept_ for m, *_ in fits]).astype(np.float64)
    return FittedProbe(coef, intercept, classes, float(np.mean([f[1] for f in fits])),
                       float(np.mean([f[2] for f in fits])), all(f[3] for f in fits))


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def binary_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """Precision, recall, F1 of the positive class (1) and the confusion matrix, as plain numbers."""
    from sklearn.metrics import confusion_matrix

    tn, fp, fn, tp = (int(v) for v in confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn}, "n_test": int(len(y_true)),
            "n_test_positive": int(np.sum(y_true == 1))}


BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_LEVEL = 0.95


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros(denominator.shape), where=denominator > 0)


def f1_difference(y_true: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray, *,
                  resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                  seed: int = 0) -> dict[str, Any]:
    """F1(a) - F1(b) on the same held-out documents, with a paired bootstrap percentile interval.

    Each resample draws the documents with replacement, the same draw for both methods (paired), and
    recomputes both F1s. A document's outcome under the two methods is one of 16 cells (tp/fp/fn/tn
    for a, times the same for b), so a resample is a multinomial draw of the cell counts: the same
    distribution as resampling indices, at a cost that does not grow with the number of documents.
    `distinguishable`: the interval excludes 0. On a few hundred documents a difference of a few
    errors is not."""
    y = np.asarray(y_true, dtype=np.int64)
    a, b = np.asarray(pred_a, dtype=np.int64), np.asarray(pred_b, dtype=np.int64)
    n = len(y)
    outcome_a, outcome_b = 2 * y + a, 2 * y + b  # 0 tn, 1 fp, 2 fn, 3 tp
    cells = np.bincount(4 * outcome_a + outcome_b, minlength=16).astype(np.float64)  # [16]
    point = _cell_f1(cells[None, :])
    difference = float(point[0][0] - point[1][0])
    if n == 0:
        return {"difference": 0.0, "low": 0.0, "high": 0.0, "level": level, "resamples": 0,
                "distinguishable": False}
    draws = np.random.default_rng(seed).multinomial(n, cells / n, size=resamples).astype(np.float64)  # [R, 16]
    f1_a, f1_b = _cell_f1(draws)
    low, high = np.quantile(f1_a - f1_b, [(1 - level) / 2, (1 + level) / 2])
    return {"difference": round(difference, 4), "low": round(float(low), 4), "high": round(float(high), 4),
            "level": level, "resamples": resamples, "distinguishable": bool(low > 0 or high < 0)}


def _cell_f1(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(F1 of a, F1 of b) for each row of 16 cell counts (cell = 4 * outcome_a + outcome_b)."""
    by_a = cells.reshape(-1, 4, 4).sum(2)  # [R, 4]: outcome of a
    by_b = cells.reshape(-1, 4, 4).sum(1)  # [R, 4]: outcome of b
    return (_f1(by_a[:, 3], by_a[:, 1], by_a[:, 2]), _f1(by_b[:, 3], by_b[:, 1], by_b[:, 2]))


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro"))


def pr_curve(y_true: np.ndarray, scores: np.ndarray, *, max_points: int = PR_POINTS) -> dict[str, Any]:
    """Precision-recall curve of the scores on held-out documents, thinned evenly along the curve,
    with the average precision (area under the step curve)."""
    from sklearn.metrics import average_precision_score, precision_recall_curve

    if len(np.unique(y_true)) < 2:
        return {"precision": [], "recall": [], "thresholds": [], "average_precision": None}
    precision, recall, thresholds = precision_recall_curve(y_true, scores)
    keep = np.unique(np.linspace(0, len(precision) - 1, min(max_points, len(precision))).round().astype(int))
    # precision/recall have one more point than thresholds (recall 0 at the end): pad with +inf
    thr = np.append(thresholds, np.inf)[keep]
    return {"precision": [round(float(v), 4) for v in precision[keep]],
            "recall": [round(float(v), 4) for v in recall[keep]],
            "thresholds": [round(float(v), 4) if np.isfinite(v) else None for v in thr],
            "average_precision": round(float(average_precision_score(y_true, scores)), 4)}


def top_contributions(rows: sp.csr_matrix, weights: np.ndarray, *, top: int = 5) -> np.ndarray:
    """For each row, the `top` features with the largest positive activation × weight, strongest
    first; -1 pads rows with fewer. [rows, top] int32. For an expression, `weights` is 1 on the
    features it names, so this is "its features active in the document, strongest first"."""
    contrib = rows.multiply(weights.reshape(1, -1)).tocsr()  # [rows, n] sparse
    out = np.full((rows.shape[0], top), -1, dtype=np.int32)
    for r in range(rows.shape[0]):
        lo, hi = contrib.indptr[r], contrib.indptr[r + 1]
        vals, cols = contrib.data[lo:hi], contrib.indices[lo:hi]
        pos = vals > 0
        vals, cols = vals[pos], cols[pos]
        order = np.argsort(-vals, kind="stable")[:top]
        out[r, : len(order)] = cols[order]
    return out
