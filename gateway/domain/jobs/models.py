"""One table for every long job, whatever queue runs it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(80), primary_key=True, comment="Deterministic: kind + hash of payload.")
    kind: Mapped[str] = mapped_column(String(50), index=True)
    queue: Mapped[str] = mapped_column(String(30))
    status: Mapped[str] = mapped_column(String(20), index=True, default="queued")
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    result: Mapped[dict[str, Any] | None]
    error: Mapped[str | None] = mapped_column(Text)
    progress_done: Mapped[int] = mapped_column(default=0)
    progress_total: Mapped[int | None]
    progress_unit: Mapped[str] = mapped_column(String(30), default="items")
    rate: Mapped[float | None]
    eta_seconds: Mapped[float | None]
    message: Mapped[str | None] = mapped_column(String(300))
    attempts: Mapped[int] = mapped_column(default=0)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True,
                                                   comment="The project of the dataset the job works on.")
    created_by_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
