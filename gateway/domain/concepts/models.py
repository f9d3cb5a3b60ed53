"""Concepts: saved feature expressions or sparse linear probes, with held-out metrics."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


class Concept(Base):
    __tablename__ = "concepts"
    __table_args__ = (UniqueConstraint("sae_run_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sae_run_id: Mapped[int] = mapped_column(ForeignKey("sae_runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(20), comment="expression | probe")
    expression: Mapped[str | None] = mapped_column(Text)
    examples: Mapped[dict[str, Any] | None] = mapped_column(
        comment="Labelled documents (by label or id) and the held-out split: the probe's training data.")
    features: Mapped[list[Any] | None] = mapped_column(
        comment="Feature indices the concept reads (an expression's references, a probe's non-zero weights).")
    probe: Mapped[dict[str, Any] | None] = mapped_column(comment="Non-zero weights by feature index, intercept, C.")
    metrics: Mapped[dict[str, Any] | None]
    apply_job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    applied: Mapped[dict[str, Any] | None] = mapped_column(
        comment="The last finished apply: matches artifact URI, counts, definition version.")
    seed: Mapped[dict[str, Any] | None] = mapped_column(
        comment="Where the labelling queue starts while one class has no label: an expression or a text query.")
    labelling: Mapped[dict[str, Any] | None] = mapped_column(
        comment="The probe trained on the label set: version, labels it read (count, hash), estimate, curve.")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
