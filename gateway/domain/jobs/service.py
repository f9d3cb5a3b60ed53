"""The life of a job: submit (idempotent), start, report progress, finish, cancel.

Job ids are deterministic (kind + hash of the payload): submitting the same work twice
returns the existing job, unless it failed or was cancelled, in which case it is queued
again and resumes from the checkpoints its earlier attempt left in the artifact store.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pydantic import BaseModel
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from contracts.jobs import TERMINAL, JobOut, JobStatus, Progress, deterministic_job_id
from gateway.db import session_scope, utcnow
from gateway.domain.auth.scope import job_project
from gateway.domain.jobs import repo
from gateway.domain.jobs.models import Job

log = logging.getLogger(__name__)

RETRYABLE = {JobStatus.failed.value, JobStatus.cancelled.value}


class JobNotFound(LookupError):
    pass


def create_or_get(
    session: Session, *, kind: str, queue: str, payload: BaseModel, created_by_key_id: int | None
) -> tuple[Job, bool]:
    """The job row for this work; the flag says whether it must be (re-)enqueued."""
    job_id = deterministic_job_id(kind, payload)
    job = repo.get_job(session, job_id=job_id)
    if job is None:
        data = payload.model_dump(mode="json")
        job = repo.add_job(
            session,
            job=Job(
                id=job_id, kind=kind, queue=queue, status=JobStatus.queued.value, payload=data,
                project_id=job_project(session, kind, data), created_by_key_id=created_by_key_id,
            ),
        )
        return job, True
    if job.status in RETRYABLE:
        job.status, job.error, job.cancel_requested, job.finished_at = JobStatus.queued.value, None, False, None
        return job, True
    return job, False


def to_out(job: Job) -> JobOut:
    return JobOut(
        id=job.id, kind=job.kind, queue=job.queue, status=JobStatus(job.status), payload=job.payload,
        progress=Progress(
            done=job.progress_done, total=job.progress_total, unit=job.progress_unit,
            rate=job.rate, eta_seconds=job.eta_seconds, message=job.message,
        ),
        result=job.result, error=job.error, attempts=job.attempts, created_at=job.created_at,
        started_at=job.started_at, finished_at=job.finished_at,
    )


class JobRecorder:
    """Writes one job's state transitions and progress to the database (throttled). The last progress a
    throttle held back is written with the job's end, so that a finished job shows where it finished."""

    def __init__(self, factory: sessionmaker[Session], job_id: str, *, min_interval_s: float = 0.5) -> None:
        self.factory = factory
        self.job_id = job_id
        self.min_interval_s = min_interval_s
        self._last_write = 0.0
        self._held: Progress | None = None  # the newest progress the throttle kept from the database
        self._last_cancel_check = 0.0
        self._cancelled = False

    def _update(self, **fields: Any) -> Job:
        with session_scope(self.factory) as session:
            job = repo.get_job(session, job_id=self.job_id)
            if job is None:
                raise JobNotFound(self.job_id)
            for name, value in fields.items():
                setattr(job, name, value)
            return job

    def load(self) -> Job:
        return self._update()

    def start(self) -> Job | None:
        """Mark running; None when the job is already terminal or was cancelled while queued."""
        with session_scope(self.factory) as session:
            job = repo.get_job(session, job_id=self.job_id)
            if job is None:
                raise JobNotFound(self.job_id)
            if job.status in {s.value for s in TERMINAL} or job.cancel_requested:
                if job.cancel_requested and job.status not in {s.value for s in TERMINAL}:
                    job.status, job.finished_at = JobStatus.cancelled.value, utcnow()
                return None
            job.status, job.started_at, job.attempts = JobStatus.running.value, utcnow(), job.attempts + 1
            job.error = None
            return job

    def progress(self, p: Progress, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_write < self.min_interval_s:
            self._held = p
            return
        self._last_write, self._held = now, None
        try:
            self._update(**_progress_fields(p))
        except OperationalError:  # database restarting: progress is advisory, the next write catches up
            log.warning("progress not recorded: database unavailable", extra={"job_id": self.job_id})

    def cancel_requested(self) -> bool:
        """Whether a cancel was asked; read at most once a second (workers poll it every step)."""
        now = time.monotonic()
        if now - self._last_cancel_check < 1.0:
            return self._cancelled
        self._last_cancel_check = now
        try:
            with session_scope(self.factory) as session:
                job = repo.get_job(session, job_id=self.job_id)
                self._cancelled = bool(job is None or job.cancel_requested)
        except OperationalError:  # database restarting: keep the last answer, ask again later
            log.warning("cancel state not read: database unavailable", extra={"job_id": self.job_id})
        return self._cancelled

    def _end(self, **fields: Any) -> None:
        """A terminal transition, written with the progress the throttle held back (if any)."""
        held, self._held = self._held, None
        self._update(**({} if held is None else _progress_fields(held)) | fields)

    def succeed(self, result: dict[str, Any]) -> None:
        self._end(status=JobStatus.succeeded.value, result=result, finished_at=utcnow(), eta_seconds=0.0)

    def fail(self, error: str) -> None:
        self._end(status=JobStatus.failed.value, error=error[:4000], finished_at=utcnow())

    def cancelled(self) -> None:
        self._end(status=JobStatus.cancelled.value, finished_at=utcnow())


def _progress_fields(p: Progress) -> dict[str, Any]:
    return {"progress_done": p.done, "progress_total": p.total, "progress_unit": p.unit, "rate": p.rate,
            "eta_seconds": p.eta_seconds, "message": p.message}


def request_cancel(session: Session, *, job_id: str) -> Job:
    job = repo.get_job(session, job_id=job_id)
    if job is None:
        raise JobNotFound(job_id)
    if job.status == JobStatus.queued.value:
        job.status, job.finished_at = JobStatus.cancelled.value, utcnow()
    if job.status not in {s.value for s in TERMINAL}:
        job.cancel_requested = True
    return job


class RateMeter:
    """Rate and ETA from units done since the start of this attempt."""

    def __init__(self, total: int | None, unit: str, already_done: int = 0) -> None:
        self.total, self.unit = total, unit
        self.t0 = time.monotonic()
        self.base = already_done

    def progress(self, done: int, message: str | None = None) -> Progress:
        elapsed = max(time.monotonic() - self.t0, 1e-6)
        rate = (done - self.base) / elapsed if done > self.base else None
        eta = (self.total - done) / rate if rate and self.total is not None else None
        return Progress(done=done, total=self.total, unit=self.unit, rate=rate, eta_seconds=eta, message=message)


async def submit(
    factory: sessionmaker[Session], runner: Any, *, kind: str, queue: str, payload: BaseModel,
    created_by_key_id: int | None = None,
) -> JobOut:
    """Create (or find) the job for this work and enqueue it unless it is already under way or done."""
    with session_scope(factory) as session:
        job, must_enqueue = create_or_get(
            session, kind=kind, queue=queue, payload=payload, created_by_key_id=created_by_key_id
        )
        out = to_out(job)
    if must_enqueue:
        await runner.enqueue(job)
    return out
