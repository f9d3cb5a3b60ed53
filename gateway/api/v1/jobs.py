"""/api/v1/jobs: every long job, its progress, and cancellation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from contracts.catalog import ErrorOut
from contracts.jobs import JobOut, JobPage, JobStatus
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.auth.service import audit
from gateway.domain.jobs import repo
from gateway.domain.jobs.service import JobNotFound, request_cancel, to_out

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.get("", response_model=JobPage)
def list_jobs(
    session: SessionDep, principal: CurrentKey,
    status_: Annotated[JobStatus | None, Query(alias="status")] = None,
    kind: Annotated[str | None, Query(max_length=50)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> JobPage:
    rows, total = repo.list_jobs(session, limit=limit, offset=offset, status=status_.value if status_ else None,
                                 kind=kind, project_ids=principal.project_ids)
    return JobPage(items=[to_out(j) for j in rows], total=total)


@router.get("/{job_id}", response_model=JobOut, responses={404: {"model": ErrorOut}})
def get_job(job_id: str, session: SessionDep, _: CurrentKey) -> JobOut:
    job = repo.get_job(session, job_id=job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"job {job_id!r} not found")
    return to_out(job)


@router.post("/{job_id}/cancel", response_model=JobOut, responses={404: {"model": ErrorOut}})
def cancel_job(job_id: str, session: SessionDep, principal: CurrentKey, rid: RequestId) -> JobOut:
    """Ask a job to stop: a queued job is cancelled at once, a running one at its next batch."""
    try:
        job = request_cancel(session, job_id=job_id)
    except JobNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"job {job_id!r} not found") from None
    audit(session, principal, "job.cancel", target_type="job", target_id=job_id, request_id=rid)
    return to_out(job)
