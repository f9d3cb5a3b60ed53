"""Datasets and their documents."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    format: Mapped[str] = mapped_column(String(10))
    source_filename: Mapped[str | None] = mapped_column(String(300))
    n_documents: Mapped[int] = mapped_column(default=0)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0, comment="Upload size.")
    text_bytes: Mapped[int] = mapped_column(BigInteger, default=0, comment="Sum of document sizes, UTF-8.")
    column_mapping: Mapped[dict[str, Any]] = mapped_column(default=dict)
    label_counts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    snapshot_artifact_id: Mapped[int | None] = mapped_column(ForeignKey("artifacts.id", ondelete="SET NULL"))
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="RESTRICT"), index=True,
                                            comment="Who may see the dataset and everything derived from it.")
    created_by_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Document(Base):
    __tablename__ = "documents"
    __table_args__ = (
        UniqueConstraint("dataset_id", "position"),
        Index("ix_documents_dataset_id_external_id", "dataset_id", "external_id", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(comment="0-based order in the upload; row index in every artifact.")
    external_id: Mapped[str | None] = mapped_column(String(300))
    text: Mapped[str] = mapped_column(Text)
    labels: Mapped[list[str]] = mapped_column(default=list)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    n_chars: Mapped[int] = mapped_column(default=0)
