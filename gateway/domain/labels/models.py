"""A concept's labels in the database: the current label of each labelled note, every change to it, the
queue's batches and the leases that keep two labellers off the same note."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow

CLASSES = ("positive", "negative", "skip")
"""A label's classes: `skip` is stored (the note was read) but never trained on."""


class ConceptLabel(Base):
    """The current label of one note for one concept (one row per note; its changes are in label_events)."""

    __tablename__ = "concept_labels"
    __table_args__ = (UniqueConstraint("concept_id", "document_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    concept_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"), index=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(comment="The note's position in its dataset (the row of the codes).")
    label: Mapped[str] = mapped_column(String(10), comment="positive | negative | skip")
    source: Mapped[str] = mapped_column(String(10), comment="queue | api | import | examples")
    reason: Mapped[str | None] = mapped_column(
        String(10), comment="Why the queue handed the note out (seed | near_miss | uncertain | random); None otherwise.")
    set_by: Mapped[str] = mapped_column(String(200), comment="The key's name (or cli) that set it.")
    set_at: Mapped[datetime] = mapped_column(default=utcnow)


class LabelEvent(Base):
    """Every change to a note's label, in order: set, changed, removed, undone, imported."""

    __tablename__ = "label_events"
    __table_args__ = (Index("ix_label_events_concept_document", "concept_id", "document_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    concept_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"))
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    label: Mapped[str | None] = mapped_column(String(10), comment="The label after the change; None: removed.")
    previous: Mapped[str | None] = mapped_column(String(10), comment="The label before it; None: there was none.")
    action: Mapped[str] = mapped_column(String(10), comment="set | delete | undo | import")
    source: Mapped[str] = mapped_column(String(10))
    reason: Mapped[str | None] = mapped_column(String(10))
    set_by: Mapped[str] = mapped_column(String(200))
    set_at: Mapped[datetime] = mapped_column(default=utcnow)


class LabelBatch(Base):
    """One batch the queue handed out: the policy, its shares and the seed, and why each note is in it."""

    __tablename__ = "label_batches"

    id: Mapped[int] = mapped_column(primary_key=True)
    concept_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"), index=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    policy: Mapped[dict[str, Any]] = mapped_column(comment="Phase (seed | probe), shares, seed, probe version.")
    items: Mapped[list[Any]] = mapped_column(comment="[{document_id, position, reason}] in the order handed out.")


class LabelLease(Base):
    """A note handed to one caller until `expires_at`: the queue gives it to nobody else meanwhile."""

    __tablename__ = "label_leases"
    __table_args__ = (UniqueConstraint("concept_id", "document_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    concept_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"), index=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    batch_id: Mapped[int] = mapped_column(ForeignKey("label_batches.id", ondelete="CASCADE"))
    holder: Mapped[str] = mapped_column(String(200), comment="The key's name it was handed to.")
    reason: Mapped[str] = mapped_column(String(10))
    expires_at: Mapped[datetime]
    released: Mapped[bool] = mapped_column(Boolean, default=False, comment="Answered: the note was labelled.")
