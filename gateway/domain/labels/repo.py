"""Queries on a concept's labels, their history, the queue's batches and leases (keyword-only; the caller owns
the transaction)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from gateway.domain.datasets.models import Document
from gateway.domain.labels.models import ConceptLabel, LabelBatch, LabelEvent, LabelLease


def get_label(session: Session, *, concept_id: int, document_id: int) -> ConceptLabel | None:
    stmt = select(ConceptLabel).where(ConceptLabel.concept_id == concept_id, ConceptLabel.document_id == document_id)
    return session.scalars(stmt).first()


def list_labels(session: Session, *, concept_id: int, limit: int, offset: int,
                label: str | None = None) -> tuple[list[tuple[ConceptLabel, str | None]], int]:
    """A page of (label, the note's external id), most recent first, and how many there are."""
    where = [ConceptLabel.concept_id == concept_id] + ([ConceptLabel.label == label] if label else [])
    stmt = (select(ConceptLabel, Document.external_id).join(Document, Document.id == ConceptLabel.document_id)
            .where(*where).order_by(ConceptLabel.set_at.desc(), ConceptLabel.id.desc()).limit(limit).offset(offset))
    total = session.scalar(select(func.count()).select_from(ConceptLabel).where(*where)) or 0
    return [(row, ext) for row, ext in session.execute(stmt)], total


def all_labels(session: Session, *, concept_id: int) -> list[tuple[int, int, str, str | None, str | None]]:
    """(document_id, position, label, reason, external_id) of every labelled note, in the order labelled."""
    stmt = (select(ConceptLabel.document_id, ConceptLabel.position, ConceptLabel.label, ConceptLabel.reason,
                   Document.external_id)
            .join(Document, Document.id == ConceptLabel.document_id)
            .where(ConceptLabel.concept_id == concept_id).order_by(ConceptLabel.set_at, ConceptLabel.id))
    return [tuple(row) for row in session.execute(stmt)]


def export_rows(session: Session, *, concept_id: int, batch: int = 5000) -> Any:
    """(external_id, document_id, label, source, set_by, set_at) of every label, streamed in label order."""
    stmt = (select(Document.external_id, ConceptLabel.document_id, ConceptLabel.label, ConceptLabel.source,
                   ConceptLabel.set_by, ConceptLabel.set_at)
            .join(Document, Document.id == ConceptLabel.document_id)
            .where(ConceptLabel.concept_id == concept_id).order_by(ConceptLabel.id).execution_options(yield_per=batch))
    yield from session.execute(stmt)


def label_counts(session: Session, *, concept_id: int) -> dict[str, int]:
    stmt = (select(ConceptLabel.label, func.count()).where(ConceptLabel.concept_id == concept_id)
            .group_by(ConceptLabel.label))
    counts = {label: n for label, n in session.execute(stmt)}
    random = session.scalar(select(func.count()).select_from(ConceptLabel).where(
        ConceptLabel.concept_id == concept_id, ConceptLabel.reason == "random",
        ConceptLabel.label.in_(("positive", "negative"))))
    return {"positive": counts.get("positive", 0), "negative": counts.get("negative", 0),
            "skip": counts.get("skip", 0), "random": random or 0}


def labelled_positions(session: Session, *, concept_id: int) -> set[int]:
    """Positions of every labelled note (skips included: a note read once is not handed out again)."""
    return set(session.scalars(select(ConceptLabel.position).where(ConceptLabel.concept_id == concept_id)))


def batch_count(session: Session, *, concept_id: int) -> int:
    return session.scalar(select(func.count()).select_from(LabelBatch).where(LabelBatch.concept_id == concept_id)) or 0


def add_event(session: Session, **fields: Any) -> LabelEvent:
    event = LabelEvent(**fields)
    session.add(event)
    return event


def history(session: Session, *, concept_id: int, document_id: int) -> list[LabelEvent]:
    stmt = (select(LabelEvent).where(LabelEvent.concept_id == concept_id, LabelEvent.document_id == document_id)
            .order_by(LabelEvent.id))
    return list(session.scalars(stmt))


def add_batch(session: Session, **fields: Any) -> LabelBatch:
    batch = LabelBatch(**fields)
    session.add(batch)
    session.flush()
    return batch


def leased_positions(session: Session, *, concept_id: int, now: datetime, not_holder: str) -> set[int]:
    """Positions of the notes leased to someone other than `not_holder`, unanswered and unexpired."""
    stmt = (select(Document.position).join(LabelLease, LabelLease.document_id == Document.id)
            .where(LabelLease.concept_id == concept_id, LabelLease.expires_at > now, LabelLease.released.is_(False),
                   LabelLease.holder != not_holder))
    return set(session.scalars(stmt))


def drop_leases(session: Session, *, concept_id: int, document_ids: list[int]) -> None:
    """Remove the notes' old leases (expired, released or the caller's own) before new ones are written."""
    if document_ids:
        session.execute(delete(LabelLease).where(LabelLease.concept_id == concept_id,
                                                 LabelLease.document_id.in_(document_ids)))


def get_lease(session: Session, *, lease_id: int) -> LabelLease | None:
    return session.get(LabelLease, lease_id)


def release_lease(session: Session, *, concept_id: int, document_id: int) -> str | None:
    """Mark the note's lease answered; returns the reason it was handed out for (None without a lease)."""
    lease = session.scalars(select(LabelLease).where(LabelLease.concept_id == concept_id,
                                                     LabelLease.document_id == document_id)).first()
    if lease is None:
        return None
    session.execute(update(LabelLease).where(LabelLease.id == lease.id).values(released=True))
    return lease.reason
