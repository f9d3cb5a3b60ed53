"""Sparse probes and held-out metrics: the numerics of concepts (no database, no HTTP).

A probe is an L1-regularised logistic regression on the SAE's sparse codes (CSR rows, one per
document): the L1 penalty leaves most weights at exactly zero, so the probe reads as a short
list of named features. Its C is chosen by stratified cross-validation on the training split
only; every figure reported is on the held-out split, which the probe never saw.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import average_precision_score, confusion_matrix, f1_score, precision_recall_curve
from sklearn.model_selection import StratifiedKFold, train_test_split

CS = np.logspace(-2, 3, 12)  # the C grid: from a handful of features to nearly unregularised
CV_FOLDS = 5
PR_POINTS = 101  # the stored precision-recall curve is thinned to at most this many points


class Split(NamedTuple):
    """Indices into the labelled rows (not dataset positions)."""

    train: np.ndarray  # int64 [n_train]
    test: np.ndarray  # int64 [n_test]


def heldout_split(y: np.ndarray, *, test_fraction: float, seed: int) -> Split:
    """A stratified split, the same for the same labels, fraction and seed."""
    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=test_fraction, random_state=seed, stratify=y)
    return Split(np.sort(train), np.sort(test))


class FittedProbe(NamedTuple):
    """A fitted probe: weights [n_features] for class 1 (binary) or [classes, n_features]."""

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    C: float
    cv_score: float  # mean cross-validated score at the chosen C (F1 or macro-F1)
    converged: bool

    def decision(self, x: sp.csr_matrix) -> np.ndarray:
        """w·x + b: [docs] for a binary probe, [docs, classes] otherwise."""
        scores = np.asarray(x @ self.coef.T) + self.intercept
        return scores[:, 0] if self.coef.shape[0] == 1 else scores

    def predict(self, x: sp.csr_matrix) -> np.ndarray:
        d = self.decision(x)
        return self.classes[(d > 0).astype(int)] if d.ndim == 1 else self.classes[d.argmax(1)]

    @property
    def used_features(self) -> np.ndarray:
        """Feature indices with a non-zero weight for any class."""
        return np.flatnonzero(np.abs(self.coef).sum(0))


def fit_probe(x: sp.csr_matrix, y: np.ndarray, *, seed: int, cs: np.ndarray = CS, max_iter: int = 2000) -> FittedProbe:
    """L1 logistic regression, classes weighted to balance, C by stratified k-fold CV.

    C is the smallest whose mean CV score is within one standard error of the best (the
    "one-standard-error rule", Hastie et al., ESL 7.10): as good as the best within noise, with
    fewer features, which is what makes a probe readable. liblinear for two classes (exact L1,
    fast on sparse rows); saga for more (liblinear cannot fit the multinomial loss). A fit that
    does not converge is kept and flagged.
    """
    classes = np.unique(y)
    binary = len(classes) == 2
    folds = max(min(CV_FOLDS, int(np.bincount(np.searchsorted(classes, y)).min())), 2)
    common = {"l1_ratio": 1.0, "solver": "liblinear" if binary else "saga", "class_weight": "balanced",
              "max_iter": max_iter, "random_state": seed}
    cv = LogisticRegressionCV(
        Cs=cs, l1_ratios=(1.0,), solver=common["solver"], class_weight="balanced", max_iter=max_iter,
        scoring="f1" if binary else "f1_macro", cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
        random_state=seed, refit=False, use_legacy_attributes=False,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        cv.fit(x, y)
        scores = np.asarray(cv.scores_).reshape(-1, len(cv.Cs_))  # [folds, Cs], Cs ascending
        mean, se = scores.mean(0), scores.std(0, ddof=1) / np.sqrt(scores.shape[0])
        best = int(np.argmax(mean))
        chosen = int(np.flatnonzero(mean >= mean[best] - se[best])[0])
        model = LogisticRegression(C=float(cv.Cs_[chosen]), **common).fit(x, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return FittedProbe(model.coef_.astype(np.float64), model.intercept_.astype(np.float64), model.classes_,
                       float(cv.Cs_[chosen]), float(mean[chosen]), converged)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def binary_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """Precision, recall, F1 of the positive class (1) and the confusion matrix, as plain numbers."""
    tn, fp, fn, tp = (int(v) for v in confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn}, "n_test": int(len(y_true)),
            "n_test_positive": int(np.sum(y_true == 1))}


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(f1_score(y_true, y_pred, average="macro"))


def pr_curve(y_true: np.ndarray, scores: np.ndarray, *, max_points: int = PR_POINTS) -> dict[str, Any]:
    """Precision-recall curve of the scores on held-out documents, thinned evenly along the curve,
    with the average precision (area under the step curve)."""
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
