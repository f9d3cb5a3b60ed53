"""Running jobs: in-process (embedded mode) or through arq on Redis (distributed mode).

Both run the same `execute_job`, which dispatches on the job's kind to a handler of the mapping
it is given (the registry, `gateway.domain.jobs.handlers`, which the worker and the app pass in)
and records every transition in the job table.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from artifacts import ArtifactStore
from artifacts.heap import trim_heap
from contracts.jobs import JobStatus, Progress, dump_job_data, load_job_data
from gateway.config import GatewaySettings
from gateway.db import session_scope
from gateway.domain.jobs.models import Job
from gateway.domain.jobs.service import JobRecorder
from gateway.services import ServiceClients

log = logging.getLogger(__name__)
QUEUES = ("gateway", "embedder", "sae", "interpreter")


class JobCancelled(Exception):
    pass


@dataclass
class JobContext:
    """What a handler gets: its job, the stores, the services, and progress reporting."""

    job_id: str
    settings: GatewaySettings
    factory: sessionmaker[Session]
    store: ArtifactStore
    services: ServiceClients
    recorder: JobRecorder
    arq_pool: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    def report(self, progress: Progress, *, force: bool = False) -> None:
        self.recorder.progress(progress, force=force)

    def check_cancelled(self) -> None:
        if self.recorder.cancel_requested():
            raise JobCancelled(self.job_id)


Handler = Callable[[JobContext, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class JobDeps:
    settings: GatewaySettings
    factory: sessionmaker[Session]
    store: ArtifactStore
    services: ServiceClients
    arq_pool: Any = None


async def execute_job(job_id: str, deps: JobDeps, handlers: Mapping[str, Handler], *,
                      transient: tuple[type[BaseException], ...] = ()) -> None:
    """Run the job's handler and record how it ended. An exception of `transient` (the arq worker's: the
    database unreachable) is not the job's failure: it leaves the job running and goes to the caller,
    which runs the job again later; the handler then resumes from its checkpoints."""
    recorder = JobRecorder(deps.factory, job_id)
    job = await asyncio.to_thread(recorder.start)
    if job is None:
        log.info("job skipped: already finished or cancelled", extra={"job_id": job_id})
        return
    handler = handlers.get(job.kind)
    ctx = JobContext(job_id, deps.settings, deps.factory, deps.store, deps.services, recorder, deps.arq_pool)
    log.info("job started", extra={"job_id": job_id, "kind": job.kind, "attempt": job.attempts})
    try:
        if handler is None:
            raise RuntimeError(f"no handler for job kind {job.kind!r}")
        result = await handler(ctx, job.payload)
    except JobCancelled:
        await asyncio.to_thread(recorder.cancelled)
        log.info("job cancelled", extra={"job_id": job_id})
    except transient as exc:
        log.warning("job interrupted, to be run again", extra={"job_id": job_id, "kind": job.kind,
                                                                "error": type(exc).__name__})
        raise
    except Exception as exc:  # the job fails; the error is recorded, the runner survives
        await asyncio.to_thread(recorder.fail, f"{type(exc).__name__}: {exc}")
        log.exception("job failed", extra={"job_id": job_id, "kind": job.kind})
    else:
        await asyncio.to_thread(recorder.succeed, result)
        log.info("job succeeded", extra={"job_id": job_id, "kind": job.kind})
    finally:
        trim_heap()  # embedded mode: the server would keep the job's peak for the rest of its life


class JobRunner(Protocol):
    async def enqueue(self, job: Job) -> None: ...

    async def close(self) -> None: ...


class InProcessRunner:
    """Embedded mode: one background thread with its own event loop runs jobs one at a time."""

    def __init__(self, deps: JobDeps, handlers: Mapping[str, Handler]) -> None:
        self.deps = deps
        self.handlers = handlers
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="prisma-jobs", daemon=True)
        self._thread.start()
        self._lock = asyncio.Lock()
        self.futures: dict[str, Future[None]] = {}

    async def _run_serially(self, job_id: str) -> None:
        async with self._lock:
            await execute_job(job_id, self.deps, self.handlers)

    async def enqueue(self, job: Job) -> None:
        self.futures[job.id] = asyncio.run_coroutine_threadsafe(self._run_serially(job.id), self.loop)

    def resume_unfinished(self) -> int:
        """Queue again the jobs a previous process left queued or running (it was killed)."""
        with session_scope(self.deps.factory) as session:
            stmt = select(Job.id).where(Job.status.in_([JobStatus.queued.value, JobStatus.running.value]))
            ids = list(session.scalars(stmt.order_by(Job.created_at)))
            for job in session.scalars(select(Job).where(Job.id.in_(ids))):
                job.status = JobStatus.queued.value
        for job_id in ids:
            self.futures[job_id] = asyncio.run_coroutine_threadsafe(self._run_serially(job_id), self.loop)
        return len(ids)

    async def wait(self, job_id: str, timeout: float | None = None) -> None:
        """Wait for a job submitted to this runner (tests, the CLI)."""
        fut = self.futures.get(job_id)
        if fut is not None:
            await asyncio.wait_for(asyncio.wrap_future(fut), timeout)

    async def close(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the jobs thread and close its loop (a running job is abandoned, to resume later)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


class ArqRunner:
    """Distributed mode: jobs go to the `gateway` arq queue, run by `prisma worker gateway`."""

    def __init__(self, redis_url: str, *, queue_name: str = "gateway") -> None:
        self.redis_url = redis_url
        self.queue_name = queue_name
        self.pool: Any = None

    async def enqueue(self, job: Job) -> None:
        if self.pool is None:
            self.pool = await create_arq_pool(self.redis_url)
        # arq refuses a second job with an id whose result it still keeps, so each attempt
        # gets its own arq id; the job table's id stays the deterministic one.
        await self.pool.enqueue_job("run_job", job.id, _job_id=f"{job.id}#{job.attempts}", _queue_name=self.queue_name)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()


async def create_arq_pool(redis_url: str) -> Any:
    from arq import create_pool
    from arq.connections import RedisSettings

    return await create_pool(
        RedisSettings.from_dsn(redis_url), job_serializer=dump_job_data, job_deserializer=load_job_data
    )
