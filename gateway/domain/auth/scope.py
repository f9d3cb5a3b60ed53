"""Which project an object belongs to: a dataset's own, and for everything derived from a dataset
(embedding runs, SAE runs, concepts, jobs) its dataset's. Every authorisation by project asks here."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from gateway.domain.concepts.models import Concept
from gateway.domain.datasets.models import Dataset
from gateway.domain.jobs.models import Job
from gateway.domain.runs.models import EmbeddingRun, SaeRun

Kind = Literal["dataset", "embedding_run", "sae_run", "concept", "job"]
NOT_FOUND_NAMES: dict[str, str] = {"dataset": "dataset", "embedding_run": "embedding run", "sae_run": "SAE run",
                                   "concept": "concept", "job": "job"}


def _project_query(kind: Kind, object_id: Any) -> Select:
    if kind == "dataset":
        return select(Dataset.project_id).where(Dataset.id == object_id)
    if kind == "job":
        return select(Job.project_id).where(Job.id == object_id)
    stmt = select(Dataset.project_id).join(EmbeddingRun, EmbeddingRun.dataset_id == Dataset.id)
    if kind == "embedding_run":
        return stmt.where(EmbeddingRun.id == object_id)
    stmt = stmt.join(SaeRun, SaeRun.embedding_run_id == EmbeddingRun.id)
    if kind == "sae_run":
        return stmt.where(SaeRun.id == object_id)
    return stmt.join(Concept, Concept.sae_run_id == SaeRun.id).where(Concept.id == object_id)


def project_of(session: Session, kind: Kind, object_id: Any) -> tuple[bool, int | None]:
    """(whether the object exists, its project id)."""
    row = session.execute(_project_query(kind, object_id)).first()
    return (row is not None, row[0] if row is not None else None)


def visible(session: Session, principal: Any, kind: Kind, object_id: Any) -> bool:
    """Whether the object exists and `principal` sees its project (an object of another project
    must be answered exactly as a missing one, so that ids do not leak)."""
    exists, project_id = project_of(session, kind, object_id)
    return exists and principal.sees(project_id)


def job_project(session: Session, kind: str, payload: dict[str, Any]) -> int | None:
    """The project of the object a job works on, from its payload (None: a job on no dataset)."""
    for key, object_kind in (("concept_id", "concept"), ("sae_run_id", "sae_run")):
        if isinstance(payload.get(key), int):
            return project_of(session, object_kind, payload[key])[1]
    if isinstance(payload.get("run_id"), int):
        run_kind: Kind = "embedding_run" if kind.startswith("embedding") else "sae_run"
        return project_of(session, run_kind, payload["run_id"])[1]
    return None


def visible_dataset_ids(project_ids: frozenset[int] | None) -> Select | None:
    """A subquery of the dataset ids in `project_ids` (None: no restriction), for lists."""
    if project_ids is None:
        return None
    return select(Dataset.id).where(Dataset.project_id.in_(project_ids))
