"""Labelled documents for a concept: from the dataset's document labels or from lists of document
ids, resolved to dataset positions (the row index of the codes) and a 0/1 class per row."""

from __future__ import annotations

import difflib
from typing import NamedTuple

import numpy as np
from sqlalchemy.orm import Session

from contracts.concepts import Examples
from gateway.domain.concepts import repo
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.probe import Split, heldout_split
from gateway.domain.datasets.models import Dataset

MIN_PER_CLASS = 10  # below this, a stratified split and 5-fold CV leave classes with 1-2 documents


class Labelled(NamedTuple):
    positions: np.ndarray  # int64 [m], ascending: dataset positions = rows of the codes
    y: np.ndarray  # int8 [m]: 1 positive, 0 negative
    n_excluded: int  # documents that were both positive and negative, left out

    def split(self, examples: Examples) -> Split:
        return heldout_split(self.y, test_fraction=examples.test_fraction, seed=examples.seed)


def _check_labels(dataset: Dataset, labels: list[str], where: str) -> None:
    known = dataset.label_counts or {}
    for i, label in enumerate(labels):
        if label not in known:
            close = difflib.get_close_matches(label, list(known), n=5, cutoff=0.4)
            hint = f"; closest: {', '.join(repr(c) for c in close)}" if close else f"; it has {len(known)} labels"
            raise ConceptInputError(f"{where}.{i}: no document of dataset {dataset.id} has the label {label!r}{hint}",
                                    field=f"{where}.{i}", extra={"candidates": close})


def _from_labels(session: Session, dataset: Dataset, examples: Examples) -> Labelled:
    spec = examples.labels
    _check_labels(dataset, spec.positive, "examples.labels.positive")
    _check_labels(dataset, spec.negative, "examples.labels.negative")
    positive, negative = set(spec.positive), set(spec.negative)
    pos, neg, both = [], [], 0
    for position, labels in repo.document_labels(session, dataset_id=dataset.id):
        is_pos, is_neg = bool(positive.intersection(labels)), bool(negative.intersection(labels))
        if is_pos and is_neg:
            both += 1
        elif is_pos:
            pos.append(position)
        elif is_neg:
            neg.append(position)
    if not negative:  # every other document, labelled or not
        taken = set(pos)
        neg = [p for p in range(dataset.n_documents) if p not in taken]
    return _labelled(pos, neg, both)


def _from_documents(session: Session, dataset: Dataset, examples: Examples) -> Labelled:
    spec = examples.documents
    found = repo.positions_of(session, dataset_id=dataset.id, document_ids=spec.positive + spec.negative)
    for name, ids in (("positive", spec.positive), ("negative", spec.negative)):
        for i, doc_id in enumerate(ids):
            if doc_id not in found:
                raise ConceptInputError(f"examples.documents.{name}.{i}: document {doc_id} is not in dataset "
                                        f"{dataset.id}", field=f"examples.documents.{name}.{i}")
    positive = set(spec.positive)
    for i, doc_id in enumerate(spec.negative):
        if doc_id in positive:
            raise ConceptInputError(f"examples.documents.negative.{i}: document {doc_id} is also listed as positive",
                                    field=f"examples.documents.negative.{i}")
    return _labelled([found[d] for d in set(spec.positive)], [found[d] for d in set(spec.negative)], 0)


def _labelled(pos: list[int], neg: list[int], both: int) -> Labelled:
    for name, group in (("positive", pos), ("negative", neg)):
        if len(group) < MIN_PER_CLASS:
            raise ConceptInputError(f"examples: only {len(group)} {name} documents; at least {MIN_PER_CLASS} are "
                                    "needed for a held-out split and cross-validation", field="examples")
    positions = np.array(pos + neg, dtype=np.int64)
    y = np.concatenate([np.ones(len(pos), np.int8), np.zeros(len(neg), np.int8)])
    order = np.argsort(positions, kind="stable")
    return Labelled(positions[order], y[order], both)


def labelled_documents(session: Session, dataset: Dataset, examples: Examples) -> Labelled:
    """The examples as (positions, classes); ConceptInputError names the bad label or document."""
    if examples.labels is not None:
        return _from_labels(session, dataset, examples)
    return _from_documents(session, dataset, examples)
