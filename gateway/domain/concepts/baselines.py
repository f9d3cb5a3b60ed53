"""Words alone, on the concept's own held-out split: what a user could do without features.

Beside every stored concept metric (same labelled documents, same train/test positions): a keyword regex
written from the positive label(s), with the share of the training positives it finds; TF-IDF 1-2-grams (words,
`?` and the brackets of a marked mention: `TFIDF_TOKENS`) with a
balanced logistic regression trained on the training split's texts only, its C chosen by CV on them (a regression
left at C = 1 is a baseline too easy to beat); the user's own regex when the examples carry one (`words_regex`,
bounded in time by the `regex` package's timeout); and, for a probe scoped to segments (`segment_words`), the
same TF-IDF + LR on the text of the segments it reads
(each document's matching segments joined with " ", "" without one; `scope.py` decides which
match, for both): words and features on the same unit. All are scored with the same
`binary_metrics` as the concept, and each carries `f1_difference`: the concept's F1 minus its own on those
documents, with a paired bootstrap interval (`probe.f1_difference`), so a page can say whether the features'
lead or lag is more than the noise of a small held-out split. Texts are read from the documents table in batches of positions
(never logged); the test split is streamed, so memory is bounded by the training sample (at most
`MAX_TFIDF_TRAIN` documents, drawn with the split's seed when there are more).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import regex
from sqlalchemy.orm import Session, sessionmaker

from contracts.concepts import Examples
from gateway.db import session_scope
from gateway.domain.concepts.examples import Labelled
from gateway.domain.concepts.probe import binary_metrics, f1_difference
from gateway.domain.concepts.scope import SegmentScope
from gateway.domain.concepts.texts import texts_at

if TYPE_CHECKING:  # scikit-learn is imported where it is used (probe.py says why)
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

MAX_TFIDF_TRAIN = 50_000  # training texts for TF-IDF; more are sampled down (seeded)
# C of the TF-IDF baseline's logistic regression: chosen by CV, as a user tuning it would (the default C = 1 scored
# 0.70 against 0.79-0.84 tuned on the demo's confirmed bronchiolitis: a baseline that easy to beat shows nothing)
TFIDF_CS = (0.1, 1.0, 10.0, 100.0, 1000.0)
TFIDF_FOLDS = 3
TFIDF_CV_MAX = 5_000  # training texts the C is chosen on (drawn with the examples' seed); the fit then reads all
# TF-IDF's terms: words of two or more characters (scikit-learn's default), plus `?` (a hedge written as
# "bronchiolite?") and `[` `]` (a mention marked in the text, as NegEx marks it): the default pattern drops them,
# and with them a cue a user's words model would keep (NegEx: 0.977 without them, 0.988 with, bench/status.py)
TFIDF_TOKENS = r"(?u)\b\w\w+\b|[\[\]?]"
WORDS_REGEX_BUDGET_S = 10.0  # a concept's own regex over all its held-out documents: past it, not scored


def search_all(pattern: regex.Pattern, texts: list[str], deadline: float) -> tuple[list[bool], bool]:
    """Whether `pattern` occurs in each text, and whether it ran out of time (before `deadline`, monotonic): a
    user's pattern may backtrack for ever, and `regex` stops a search at its timeout where `re` cannot."""
    found: list[bool] = []
    for text in texts:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            found.append(pattern.search(text, timeout=left) is not None)
        except TimeoutError:
            return found + [False] * (len(texts) - len(found)), True
    return found, False


def label_stem(word: str) -> str:
    """The first max(5, len-3) characters: `bronchiolitis` -> `bronchioli`."""
    return word[: max(5, len(word) - 3)]


def regex_pattern(positive_labels: list[str]) -> str | None:
    """Case-insensitive alternation of the stems of the words of each positive label (the part
    before `:`, split on `_` and spaces); None when no label has a word."""
    stems: list[str] = []
    for label in positive_labels:
        for word in re.split(r"[_\s]+", label.split(":", 1)[0]):
            word = word.strip().lower()
            if word and (stem := re.escape(label_stem(word))) not in stems:
                stems.append(stem)
    return "|".join(stems) or None


def _figures(y: np.ndarray, pred: np.ndarray, predicted: np.ndarray | None, seed: int) -> dict[str, Any]:
    m = binary_metrics(y, pred)
    figures = {k: m[k] for k in ("precision", "recall", "f1", "confusion")}
    if predicted is not None:  # the concept's predictions on the same held-out documents, in the same order
        figures["f1_difference"] = f1_difference(y, predicted, pred, seed=seed)
    return figures


def tfidf_c(x: Any, y: np.ndarray, seed: int) -> float:
    """The logistic regression's C by stratified 3-fold CV on F1 over TFIDF_CS, on at most TFIDF_CV_MAX of the
    training rows (drawn with `seed`): what a user who tunes the words' model would choose. 1.0 when a class has
    fewer rows than folds."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    rows = np.arange(len(y))
    if len(rows) > TFIDF_CV_MAX:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), TFIDF_CV_MAX, replace=False))
    if min(int(y[rows].sum()), int(len(rows) - y[rows].sum())) < TFIDF_FOLDS:
        return 1.0
    folds = StratifiedKFold(TFIDF_FOLDS, shuffle=True, random_state=seed)
    search = GridSearchCV(LogisticRegression(class_weight="balanced", solver="liblinear", max_iter=1000),
                          {"C": TFIDF_CS}, scoring="f1", cv=folds)
    return float(search.fit(x[rows], y[rows]).best_params_["C"])


def _fit_tfidf(texts: list[str], y: np.ndarray, seed: int) -> tuple[TfidfVectorizer, LogisticRegression] | None:
    """TF-IDF 1-2-grams + balanced LR with C by CV (`tfidf_c`), or None when no term occurs in two of the texts."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    try:
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2, token_pattern=TFIDF_TOKENS)
        x = vectorizer.fit_transform(texts)
        model = LogisticRegression(C=tfidf_c(x, y, seed), class_weight="balanced", solver="liblinear", max_iter=1000)
        return vectorizer, model.fit(x, y)
    except ValueError:  # no term in two training documents (or one class): no TF-IDF baseline
        return None


DENSE_CS = (0.01, 0.1, 1.0, 10.0, 100.0)


def dense_lr(vectors: np.ndarray, train: np.ndarray, y_train: np.ndarray, test: np.ndarray,
             seed: int) -> tuple[np.ndarray, float] | None:
    """The embedding run's own document vectors (rows at unit norm) + balanced logistic regression, C by stratified
    3-fold CV on F1 over DENSE_CS on the training rows only: (held-out predictions, C). The ceiling the features
    approach: the same information, read without naming it. None when a class has fewer training rows than folds."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    if min(int(y_train.sum()), int(len(y_train) - y_train.sum())) < TFIDF_FOLDS:
        return None
    x = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    rows = np.arange(len(train))
    if len(rows) > TFIDF_CV_MAX:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), TFIDF_CV_MAX, replace=False))
    search = GridSearchCV(LogisticRegression(class_weight="balanced", max_iter=2000), {"C": DENSE_CS}, scoring="f1",
                          cv=StratifiedKFold(TFIDF_FOLDS, shuffle=True, random_state=seed))
    c = float(search.fit(x[train[rows]], y_train[rows]).best_params_["C"])
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(x[train], y_train)
    return model.predict(x[test]).astype(np.int8), c


def compute_baselines(factory: sessionmaker[Session], dataset_id: int, labelled: Labelled, examples: Examples,
                      scope: SegmentScope | None = None, predicted: np.ndarray | None = None,
                      vectors: np.ndarray | None = None) -> dict[str, Any]:
    """{"regex": {pattern, positive_coverage, precision, recall, f1, confusion} | None,
    "words_regex": {pattern, match, ...} | None, "words_regex_skipped": str | None (the examples' own regex),
    "tfidf_lr": {..., n_train, sampled, C} | None,
    "tfidf_lr_segments": {..., n_train, sampled, segment_words} | None (None without a scope),
    "dense_lr": {..., n_train, C} | None (None without `vectors`, the run's document vectors [docs, d])}; with
    `predicted` (the concept's 0/1 on the held-out split, in its order), each with `f1_difference` too."""
    split = labelled.split(examples)
    train_pos, y_train = labelled.positions[split.train], labelled.y[split.train]
    test_pos, y_test = labelled.positions[split.test], labelled.y[split.test]
    sampled = len(train_pos) > MAX_TFIDF_TRAIN
    if sampled:
        keep = np.sort(np.random.default_rng(examples.seed).choice(len(train_pos), MAX_TFIDF_TRAIN, replace=False))
        train_pos, y_train = train_pos[keep], y_train[keep]
    pattern = regex_pattern(examples.labels.positive) if examples.labels is not None else None
    compiled = re.compile(pattern, re.IGNORECASE) if pattern else None

    train_texts: list[str] = []
    scoped_texts: list[str] = []
    with session_scope(factory) as session:
        for batch, texts in texts_at(session, dataset_id=dataset_id, positions=train_pos):
            train_texts += texts
            scoped_texts += scope.texts(batch, texts) if scope is not None else []
    coverage = (float(np.mean([compiled.search(t) is not None for t, y in zip(train_texts, y_train) if y]))
                if compiled is not None and y_train.any() else None)
    model = _fit_tfidf(train_texts, y_train, examples.seed)
    scoped = _fit_tfidf(scoped_texts, y_train, examples.seed) if scope is not None else None
    del train_texts, scoped_texts

    words = regex.compile(examples.words_regex, regex.IGNORECASE) if examples.words_regex else None
    words_found, words_late = np.zeros(len(test_pos), bool), False
    deadline = time.monotonic() + WORDS_REGEX_BUDGET_S
    regex_pred = np.zeros(len(test_pos), np.int8)
    tfidf_pred = np.zeros(len(test_pos), np.int8)
    scoped_pred = np.zeros(len(test_pos), np.int8)
    done = 0
    with session_scope(factory) as session:
        for batch, texts in texts_at(session, dataset_id=dataset_id, positions=test_pos):
            end = done + len(batch)
            if compiled is not None:
                regex_pred[done:end] = [compiled.search(t) is not None for t in texts]
            if words is not None and not words_late:
                words_found[done:end], words_late = search_all(words, texts, deadline)
            if model is not None:
                tfidf_pred[done:end] = model[1].predict(model[0].transform(texts))
            if scoped is not None:
                scoped_pred[done:end] = scoped[1].predict(scoped[0].transform(scope.texts(batch, texts)))
            done = end
    fitted_on = {"n_train": int(len(train_pos)), "sampled": sampled}
    # notes appended after the embedding run have codes (an extended SAE run) but no vectors of that run
    covered = vectors is not None and max(int(train_pos.max(initial=-1)), int(test_pos.max(initial=-1))) < len(vectors)
    dense = dense_lr(vectors, train_pos, y_train, test_pos, examples.seed) if covered else None
    if predicted is not None and len(predicted) != len(y_test):
        raise ValueError(f"predicted: {len(predicted)} predictions for {len(y_test)} held-out documents")

    def figures(pred: np.ndarray) -> dict[str, Any]:
        return _figures(y_test, pred, predicted, examples.seed)

    words_pred = (words_found if examples.words_regex_match == "positive" else ~words_found).astype(np.int8)
    scored_words = words is not None and not words_late
    return {
        "regex": ({"pattern": pattern, "positive_coverage": coverage, **figures(regex_pred)}
                  if compiled is not None else None),
        "words_regex": ({"pattern": examples.words_regex, "match": examples.words_regex_match, **figures(words_pred)}
                        if scored_words else None),
        "words_regex_skipped": (f"it ran past {WORDS_REGEX_BUDGET_S:g} s over the {len(test_pos)} held-out documents"
                                if words_late else None),
        "tfidf_lr": {**figures(tfidf_pred), **fitted_on, "C": model[1].C} if model is not None else None,
        "tfidf_lr_segments": ({**figures(scoped_pred), **fitted_on, "C": scoped[1].C,
                               "segment_words": list(scope.words)} if scoped is not None else None),
        "dense_lr": {**figures(dense[0]), **fitted_on, "C": dense[1]} if dense is not None else None,
    }
