"""Queries on the job table."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.domain.jobs.models import Job


def get_job(session: Session, *, job_id: str) -> Job | None:
    return session.get(Job, job_id)


def list_jobs(
    session: Session, *, limit: int, offset: int, status: str | None = None, kind: str | None = None,
    project_ids: frozenset[int] | None = None,
) -> tuple[list[Job], int]:
    """A page of jobs, newest first; only those of `project_ids` when given."""
    stmt = select(Job)
    count = select(func.count()).select_from(Job)
    if project_ids is not None:
        stmt, count = stmt.where(Job.project_id.in_(project_ids)), count.where(Job.project_id.in_(project_ids))
    if status:
        stmt, count = stmt.where(Job.status == status), count.where(Job.status == status)
    if kind:
        stmt, count = stmt.where(Job.kind == kind), count.where(Job.kind == kind)
    rows = session.scalars(stmt.order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset))
    return list(rows), session.scalar(count) or 0


def add_job(session: Session, *, job: Job) -> Job:
    session.add(job)
    session.flush()
    return job
