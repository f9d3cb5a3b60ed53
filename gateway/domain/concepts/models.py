"""Concepts: saved feature expressions or sparse linear probes, with held-out metrics."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


class Concept(Base):
    __tablename__ = "concepts"

    id: Mapped[int] = mapped_column(primary_key=True)
    sae_run_id: Mapped[int] = mapped_column(ForeignKey("sae_runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20), comment="expression | probe")
    expression: Mapped[str | None] = mapped_column(Text)
    probe: Mapped[dict[str, Any] | None] = mapped_column(comment="Non-zero weights by feature index, intercept, C.")
    metrics: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
