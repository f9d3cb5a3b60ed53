"""Words alone, on the concept's own held-out split: what a user could do without features.

Two baselines are computed beside every stored concept metric (same labelled documents, same
train/test positions): a keyword regex written from the positive label(s), and TF-IDF 1-2-grams
with a balanced logistic regression trained on the training split's texts only. A probe scoped to
segments (`segment_words`) gets a third, the same TF-IDF + LR on the text of the segments it reads
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
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sqlalchemy.orm import Session, sessionmaker

from contracts.concepts import Examples
from gateway.db import session_scope
from gateway.domain.concepts.examples import Labelled
from gateway.domain.concepts.probe import binary_metrics, f1_difference
from gateway.domain.concepts.scope import SegmentScope
from gateway.domain.concepts.texts import texts_at

MAX_TFIDF_TRAIN = 50_000  # training texts for TF-IDF; more are sampled down (seeded)


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


def _fit_tfidf(texts: list[str], y: np.ndarray) -> tuple[TfidfVectorizer, LogisticRegression] | None:
    """TF-IDF 1-2-grams + balanced LR, or None when no term occurs in two of the texts."""
    try:
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
        x = vectorizer.fit_transform(texts)
        return vectorizer, LogisticRegression(class_weight="balanced", max_iter=1000).fit(x, y)
    except ValueError:  # no term in two training documents (or one class): no TF-IDF baseline
        return None


def compute_baselines(factory: sessionmaker[Session], dataset_id: int, labelled: Labelled, examples: Examples,
                      scope: SegmentScope | None = None, predicted: np.ndarray | None = None) -> dict[str, Any]:
    """{"regex": {pattern, precision, recall, f1, confusion} | None, "tfidf_lr": {..., n_train, sampled} | None,
    "tfidf_lr_segments": {..., n_train, sampled, segment_words} | None (None without a scope)}; with
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
    model = _fit_tfidf(train_texts, y_train)
    scoped = _fit_tfidf(scoped_texts, y_train) if scope is not None else None
    del train_texts, scoped_texts

    regex_pred = np.zeros(len(test_pos), np.int8)
    tfidf_pred = np.zeros(len(test_pos), np.int8)
    scoped_pred = np.zeros(len(test_pos), np.int8)
    done = 0
    with session_scope(factory) as session:
        for batch, texts in texts_at(session, dataset_id=dataset_id, positions=test_pos):
            end = done + len(batch)
            if compiled is not None:
                regex_pred[done:end] = [compiled.search(t) is not None for t in texts]
            if model is not None:
                tfidf_pred[done:end] = model[1].predict(model[0].transform(texts))
            if scoped is not None:
                scoped_pred[done:end] = scoped[1].predict(scoped[0].transform(scope.texts(batch, texts)))
            done = end
    fitted_on = {"n_train": int(len(train_pos)), "sampled": sampled}
    if predicted is not None and len(predicted) != len(y_test):
        raise ValueError(f"predicted: {len(predicted)} predictions for {len(y_test)} held-out documents")

    def figures(pred: np.ndarray) -> dict[str, Any]:
        return _figures(y_test, pred, predicted, examples.seed)

    return {
        "regex": {"pattern": pattern, **figures(regex_pred)} if compiled is not None else None,
        "tfidf_lr": {**figures(tfidf_pred), **fitted_on} if model is not None else None,
        "tfidf_lr_segments": ({**figures(scoped_pred), **fitted_on, "segment_words": list(scope.words)}
                              if scoped is not None else None),
    }
