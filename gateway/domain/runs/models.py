"""Embedding runs (one model, pooling, chunking over a dataset) and SAE runs over them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


class EmbeddingRun(Base):
    __tablename__ = "embedding_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(300))
    model_path: Mapped[str | None] = mapped_column(Text)
    pooling: Mapped[str] = mapped_column(String(10), default="mean")
    normalize: Mapped[bool] = mapped_column(default=True)
    max_length: Mapped[int | None]
    dim: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(20), default="queued")
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)
    result: Mapped[dict[str, Any] | None]
    n_documents: Mapped[int | None]
    n_chunks: Mapped[int | None]
    n_tokens: Mapped[int | None]
    docs_per_s: Mapped[float | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]


class SaeRun(Base):
    __tablename__ = "sae_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    embedding_run_id: Mapped[int] = mapped_column(ForeignKey("embedding_runs.id", ondelete="CASCADE"), index=True)
    sweep_id: Mapped[str | None] = mapped_column(String(64), index=True, comment="Runs requested together.")
    status: Mapped[str] = mapped_column(String(20), default="queued")
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    d: Mapped[int | None]
    n_latents: Mapped[int | None]
    k: Mapped[int | None]
    imported: Mapped[bool] = mapped_column(default=False)
    source: Mapped[str | None] = mapped_column(Text, comment="Where an imported SAE came from.")
    metrics: Mapped[dict[str, Any] | None] = mapped_column(comment="Final held-out figures.")
    # Up to 2,000 points (~200 kB of JSON): deferred, so that the run lookup of every search
    # request does not decode it; loaded on first access.
    loss_curve: Mapped[list[Any] | None] = mapped_column(deferred=True)
    result: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]

    @property
    def precision(self) -> str | None:
        """What the training steps' encoder matmul ran in (fp32 or bf16), from the stored result; None before."""
        return (self.result or {}).get("precision")

    @property
    def segment_words(self) -> int:
        """Words its segments were read by (the embedding run's word_states), from the stored result; 0: none."""
        return int((self.result or {}).get("segment_words") or 0)
