"""Queries on concepts and on the documents they are trained on and exported with
(keyword-only; the caller owns the transaction)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.models import Concept
from gateway.domain.datasets.models import Document
from gateway.domain.runs.repo import sae_runs_of

IN_BATCH = 1000  # bounded IN lists


def add_concept(session: Session, **fields: Any) -> Concept:
    concept = Concept(**fields)
    session.add(concept)
    session.flush()
    return concept


def get_concept(session: Session, *, concept_id: int) -> Concept | None:
    return session.get(Concept, concept_id)


def find_concept(session: Session, *, sae_run_id: int, name: str) -> Concept | None:
    stmt = select(Concept).where(Concept.sae_run_id == sae_run_id, Concept.name == name)
    return session.scalars(stmt).first()


def list_concepts(session: Session, *, sae_run_id: int | None = None, limit: int = 200,
                  offset: int = 0, project_ids: frozenset[int] | None = None) -> tuple[list[Concept], int]:
    """A page of concepts, newest first; only those on datasets of `project_ids` when given."""
    stmt, count = select(Concept), select(func.count()).select_from(Concept)
    if project_ids is not None:
        mine = Concept.sae_run_id.in_(sae_runs_of(project_ids))
        stmt, count = stmt.where(mine), count.where(mine)
    if sae_run_id is not None:
        stmt, count = stmt.where(Concept.sae_run_id == sae_run_id), count.where(Concept.sae_run_id == sae_run_id)
    rows = session.scalars(stmt.order_by(Concept.id.desc()).limit(limit).offset(offset))
    return list(rows), session.scalar(count) or 0


def document_labels(session: Session, *, dataset_id: int) -> Iterator[tuple[int, list[str]]]:
    """(position, labels) of every document of the dataset that has labels, in position order,
    streamed (the texts are never read)."""
    stmt = (select(Document.position, Document.labels).where(Document.dataset_id == dataset_id)
            .order_by(Document.position).execution_options(yield_per=5000))
    for position, labels in session.execute(stmt):
        if labels:
            yield position, labels


def positions_of(session: Session, *, dataset_id: int, document_ids: Sequence[int]) -> dict[int, int]:
    """Document id → position, for those ids that are documents of this dataset."""
    out: dict[int, int] = {}
    ids = list(dict.fromkeys(document_ids))
    for start in range(0, len(ids), IN_BATCH):
        stmt = select(Document.id, Document.position).where(
            Document.dataset_id == dataset_id, Document.id.in_(ids[start : start + IN_BATCH]))
        out.update({doc_id: position for doc_id, position in session.execute(stmt)})
    return out


def documents_at(session: Session, *, dataset_id: int, positions: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    """Position → (id, external_id, labels, metadata) for an export batch; never the text."""
    out: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(positions), IN_BATCH):
        stmt = select(Document.position, Document.id, Document.external_id, Document.labels, Document.meta).where(
            Document.dataset_id == dataset_id, Document.position.in_(list(positions[start : start + IN_BATCH])))
        out.update({row[0]: tuple(row[1:]) for row in session.execute(stmt)})
    return out


def get_or_404(session: Session, concept_id: int) -> Concept:
    """The concept, or a 404 naming the field."""
    concept = get_concept(session, concept_id=concept_id)
    if concept is None:
        raise ConceptInputError(f"concept {concept_id} not found", field="concept_id", status_code=404)
    return concept
