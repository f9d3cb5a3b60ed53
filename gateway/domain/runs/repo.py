"""Queries on embedding runs and SAE runs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from contracts.embed import EmbeddingRunSpec
from gateway.domain.datasets.models import Dataset
from gateway.domain.runs.models import EmbeddingRun, SaeRun


def derived_from_dataset(session: Session, *, dataset_id: int) -> dict[str, list[int]]:
    """Ids of everything computed from a dataset: its embedding runs, their SAE runs, their concepts."""
    from gateway.domain.concepts.models import Concept

    emb = list(session.scalars(select(EmbeddingRun.id).where(EmbeddingRun.dataset_id == dataset_id)))
    sae = list(session.scalars(select(SaeRun.id).where(SaeRun.embedding_run_id.in_(emb)))) if emb else []
    concepts = list(session.scalars(select(Concept.id).where(Concept.sae_run_id.in_(sae)))) if sae else []
    return {"embedding_run": emb, "sae_run": sae, "concept": concepts}


def jobs_of_derived(session: Session, derived: dict[str, list[int]]) -> list[str]:
    """The jobs that compute those runs and concepts (to cancel before their files go)."""
    from gateway.domain.concepts.models import Concept

    found: list[str | None] = []
    for model, column, ids in [(EmbeddingRun, EmbeddingRun.job_id, derived["embedding_run"]),
                               (SaeRun, SaeRun.job_id, derived["sae_run"]),
                               (Concept, Concept.apply_job_id, derived["concept"])]:
        if ids:
            found += session.scalars(select(column).where(model.id.in_(ids)))
    return [j for j in found if j]


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


def _datasets_of(project_ids: frozenset[int]) -> Select:
    return select(Dataset.id).where(Dataset.project_id.in_(project_ids))


def embedding_runs_of(project_ids: frozenset[int]) -> Select:
    """The ids of the embedding runs on the datasets of `project_ids` (a subquery)."""
    return select(EmbeddingRun.id).where(EmbeddingRun.dataset_id.in_(_datasets_of(project_ids)))


def sae_runs_of(project_ids: frozenset[int]) -> Select:
    """The ids of the SAE runs on the datasets of `project_ids` (a subquery)."""
    return select(SaeRun.id).where(SaeRun.embedding_run_id.in_(embedding_runs_of(project_ids)))


def list_embedding_runs(
    session: Session, *, limit: int, offset: int, dataset_id: int | None = None,
    project_ids: frozenset[int] | None = None,
) -> tuple[list[EmbeddingRun], int]:
    """A page of runs, newest first; only those on datasets of `project_ids` when given."""
    stmt = select(EmbeddingRun)
    count = select(func.count()).select_from(EmbeddingRun)
    if dataset_id is not None:
        stmt, count = stmt.where(EmbeddingRun.dataset_id == dataset_id), count.where(EmbeddingRun.dataset_id == dataset_id)
    if project_ids is not None:
        mine = EmbeddingRun.dataset_id.in_(_datasets_of(project_ids))
        stmt, count = stmt.where(mine), count.where(mine)
    rows = session.scalars(stmt.order_by(EmbeddingRun.id.desc()).limit(limit).offset(offset))
    return list(rows), session.scalar(count) or 0


def get_sae_run(session: Session, *, run_id: int) -> SaeRun | None:
    return session.get(SaeRun, run_id)


def list_sae_runs(session: Session, *, embedding_run_id: int | None = None, sweep_id: str | None = None,
                  project_ids: frozenset[int] | None = None) -> list[SaeRun]:
    """The newest 500 runs (of an embedding run or a sweep, for the pages and the demo)."""
    return page_sae_runs(session, embedding_run_id=embedding_run_id, sweep_id=sweep_id, project_ids=project_ids,
                         limit=500, offset=0)[0]


def page_sae_runs(session: Session, *, limit: int, offset: int, embedding_run_id: int | None = None,
                  sweep_id: str | None = None, project_ids: frozenset[int] | None = None) -> tuple[list[SaeRun], int]:
    """A page of runs, newest first, and how many there are; only those on datasets of `project_ids` when given."""
    where = []
    if project_ids is not None:
        where.append(SaeRun.embedding_run_id.in_(embedding_runs_of(project_ids)))
    if embedding_run_id is not None:
        where.append(SaeRun.embedding_run_id == embedding_run_id)
    if sweep_id is not None:
        where.append(SaeRun.sweep_id == sweep_id)
    rows = session.scalars(select(SaeRun).where(*where).order_by(SaeRun.id.desc()).limit(limit).offset(offset))
    return list(rows), session.scalar(select(func.count()).select_from(SaeRun).where(*where)) or 0


def succeeded_sae_runs(session: Session, *, project_ids: frozenset[int]) -> list[tuple[SaeRun, Dataset]]:
    """The succeeded SAE runs on datasets of `project_ids`, newest first, each with its dataset (one query)."""
    stmt = (select(SaeRun, Dataset).join(EmbeddingRun, SaeRun.embedding_run_id == EmbeddingRun.id)
            .join(Dataset, EmbeddingRun.dataset_id == Dataset.id)
            .where(SaeRun.status == "succeeded", Dataset.project_id.in_(project_ids)))
    return [(run, ds) for run, ds in session.execute(stmt.order_by(SaeRun.id.desc()).limit(500))]


def delete_embedding_run(session: Session, *, run_id: int) -> None:
    run = session.get(EmbeddingRun, run_id)
    if run is not None:
        session.delete(run)
        session.flush()
