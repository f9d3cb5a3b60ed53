"""Queries on datasets and documents (keyword-only; the caller owns the transaction)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, defer

from gateway.domain.datasets.models import Dataset, Document


def add_dataset(session: Session, **fields: Any) -> Dataset:
    ds = Dataset(**fields)
    session.add(ds)
    session.flush()
    return ds


def get_dataset(session: Session, *, dataset_id: int) -> Dataset | None:
    return session.get(Dataset, dataset_id)


def list_datasets(session: Session, *, limit: int, offset: int,
                  project_ids: frozenset[int] | None = None) -> tuple[list[Dataset], int]:
    """A page of datasets, newest first; only those of `project_ids` when given."""
    stmt, count = select(Dataset), select(func.count()).select_from(Dataset)
    if project_ids is not None:
        stmt, count = stmt.where(Dataset.project_id.in_(project_ids)), count.where(Dataset.project_id.in_(project_ids))
    total = session.scalar(count) or 0
    rows = session.scalars(stmt.order_by(Dataset.id.desc()).limit(limit).offset(offset))
    return list(rows), total


def insert_documents(session: Session, *, rows: list[dict[str, Any]]) -> list[int]:
    """Insert a batch in one round trip; returns the new ids in the rows' order."""
    stmt = insert(Document).returning(Document.id, sort_by_parameter_order=True)
    return list(session.scalars(stmt, rows))


def list_documents(
    session: Session, *, dataset_id: int, limit: int, offset: int, text_chars: int
) -> tuple[list[tuple[Document, str]], int]:
    """A page of documents, each with its first `text_chars` characters: the whole text (up to 10 MB
    a document) is never read, and must not be touched on the rows returned (it is deferred)."""
    excerpt = func.substr(Document.text, 1, text_chars).label("excerpt")
    stmt = select(Document, excerpt).options(defer(Document.text)).where(Document.dataset_id == dataset_id)
    count = select(func.count()).select_from(Document).where(Document.dataset_id == dataset_id)
    rows = session.execute(stmt.order_by(Document.position).limit(limit).offset(offset))
    return [(doc, text) for doc, text in rows], session.scalar(count) or 0


def get_document(session: Session, *, dataset_id: int, document_id: int) -> Document | None:
    doc = session.get(Document, document_id)
    return doc if doc is not None and doc.dataset_id == dataset_id else None


def count_documents(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Document)) or 0


def count_datasets(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Dataset)) or 0


def delete_dataset(session: Session, *, dataset: Dataset) -> None:
    # Documents go first in bulk: the ORM cascade would load them all.
    session.execute(delete(Document).where(Document.dataset_id == dataset.id))
    session.delete(dataset)


def ids_at(session: Session, *, dataset_id: int, positions: list[int], batch: int = 1000) -> dict[int, int]:
    """Position → document id for the given positions of the dataset."""
    out: dict[int, int] = {}
    for start in range(0, len(positions), batch):
        stmt = select(Document.position, Document.id).where(
            Document.dataset_id == dataset_id, Document.position.in_(positions[start:start + batch]))
        out.update(dict(session.execute(stmt).all()))
    return out
