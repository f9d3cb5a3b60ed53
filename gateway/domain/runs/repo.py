"""Queries on embedding runs and SAE runs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from contracts.embed import EmbeddingRunSpec
from gateway.domain.runs.models import EmbeddingRun, SaeRun


def add_embedding_run(session: Session, **fields: Any) -> EmbeddingRun:
    run = EmbeddingRun(**fields)
    session.add(run)
    session.flush()
    return run


def get_embedding_run(session: Session, *, run_id: int) -> EmbeddingRun | None:
    return session.get(EmbeddingRun, run_id)


def find_embedding_run(session: Session, *, dataset_id: int, spec: dict[str, Any]) -> EmbeddingRun | None:
    """A run of the same dataset with the same spec that did not fail (the same work). Stored specs
    are read through EmbeddingRunSpec, so one saved before a field was added (`segments`) still
    matches a request that leaves that field at its default."""
    stmt = select(EmbeddingRun).where(
        EmbeddingRun.dataset_id == dataset_id, EmbeddingRun.status.notin_(["failed", "cancelled"])
    )
    return next((r for r in session.scalars(stmt.order_by(EmbeddingRun.id))
                 if not (r.spec or {}).get("imported")  # imported vectors: no spec of the embedder's
                 and EmbeddingRunSpec.model_validate(r.spec).model_dump(mode="json") == spec), None)


def list_embedding_runs(
    session: Session, *, limit: int, offset: int, dataset_id: int | None = None
) -> tuple[list[EmbeddingRun], int]:
    stmt = select(EmbeddingRun)
    count = select(func.count()).select_from(EmbeddingRun)
    if dataset_id is not None:
        stmt, count = stmt.where(EmbeddingRun.dataset_id == dataset_id), count.where(EmbeddingRun.dataset_id == dataset_id)
    rows = session.scalars(stmt.order_by(EmbeddingRun.id.desc()).limit(limit).offset(offset))
    return list(rows), session.scalar(count) or 0


def get_sae_run(session: Session, *, run_id: int) -> SaeRun | None:
    return session.get(SaeRun, run_id)


def list_sae_runs(session: Session, *, embedding_run_id: int | None = None, sweep_id: str | None = None) -> list[SaeRun]:
    stmt = select(SaeRun)
    if embedding_run_id is not None:
        stmt = stmt.where(SaeRun.embedding_run_id == embedding_run_id)
    if sweep_id is not None:
        stmt = stmt.where(SaeRun.sweep_id == sweep_id)
    return list(session.scalars(stmt.order_by(SaeRun.id.desc()).limit(500)))


def delete_embedding_run(session: Session, *, run_id: int) -> None:
    run = session.get(EmbeddingRun, run_id)
    if run is not None:
        session.delete(run)
        session.flush()
