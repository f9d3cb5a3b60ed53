"""Features of an SAE run, their interpretations (several per feature) and families."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


class Feature(Base):
    __tablename__ = "features"
    __table_args__ = (UniqueConstraint("sae_run_id", "index"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sae_run_id: Mapped[int] = mapped_column(ForeignKey("sae_runs.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(comment="Latent index in the SAE, 0-based.")
    density: Mapped[float] = mapped_column(default=0.0, comment="Fraction of documents where it fires.")
    mean_activation: Mapped[float] = mapped_column(default=0.0)
    max_activation: Mapped[float] = mapped_column(default=0.0)
    histogram: Mapped[dict[str, Any]] = mapped_column(default=dict)
    neighbours: Mapped[dict[str, Any]] = mapped_column(default=dict, comment="Top co-occurring and decoder-similar.")
    best_interpretation_id: Mapped[int | None] = mapped_column(
        ForeignKey("interpretations.id", ondelete="SET NULL", use_alter=True)
    )
    skip_reason: Mapped[str | None] = mapped_column(
        String(300), comment="Why the last naming job gave it no name (too rare, no separating phrase, ...).")


class Interpretation(Base):
    __tablename__ = "interpretations"

    id: Mapped[int] = mapped_column(primary_key=True)
    feature_id: Mapped[int] = mapped_column(ForeignKey("features.id", ondelete="CASCADE"), index=True)
    backend: Mapped[str] = mapped_column(String(30))
    model: Mapped[str | None] = mapped_column(String(200))
    prompt_version: Mapped[str | None] = mapped_column(String(30))
    label: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    score_embedding: Mapped[float | None]
    score_detection: Mapped[float | None]
    score: Mapped[float | None] = mapped_column(comment="The score used for best-of-n.")
    reliable: Mapped[bool | None]
    threshold: Mapped[float | None] = mapped_column(
        comment="Lowest activation above which the name holds with precision >= 0.8; label:\"...\" means above it.")
    evidence: Mapped[dict[str, Any]] = mapped_column(default=dict, comment="Document ids shown, never text.")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Family(Base):
    __tablename__ = "families"

    id: Mapped[int] = mapped_column(primary_key=True)
    sae_run_id: Mapped[int] = mapped_column(ForeignKey("sae_runs.id", ondelete="CASCADE"), index=True)
    iteration: Mapped[int]
    root_index: Mapped[int] = mapped_column(comment="Feature index of the parent.")
    size: Mapped[int]
    label: Mapped[str | None] = mapped_column(String(200))


class FamilyMember(Base):
    __tablename__ = "family_members"
    __table_args__ = (UniqueConstraint("family_id", "feature_index"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    family_id: Mapped[int] = mapped_column(ForeignKey("families.id", ondelete="CASCADE"))
    feature_index: Mapped[int] = mapped_column(index=True)
    parent_index: Mapped[int | None]
    depth: Mapped[int] = mapped_column(default=0)
