"""The gateway's arq worker (queue `gateway`): runs pipeline jobs from the job table.

`prisma worker gateway` starts it. Heavy resources (engine, store, service clients) are made
once in `on_startup` and kept in arq's `ctx`.
"""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry
from arq.connections import RedisSettings
from sqlalchemy.exc import OperationalError

import gateway.models  # noqa: F401 - every ORM model registered, so foreign keys resolve in this process
from artifacts import ArtifactStore
from gateway.config import get_settings
from gateway.db import session_factory
from contracts.jobs import dump_job_data, load_job_data
from gateway.domain.jobs.handlers import HANDLERS
from gateway.domain.jobs.runner import JobDeps, execute_job
from gateway.domain.jobs.service import JobRecorder
from gateway.logging import configure_logging
from gateway.services import ServiceClients

log = logging.getLogger(__name__)


async def startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    configure_logging(settings.log_level, json_lines=settings.log_json)
    services = ServiceClients(settings)
    ctx["deps"] = JobDeps(
        settings, session_factory(settings.sqlalchemy_url), ArtifactStore(settings.artifact_root), services,
        arq_pool=ctx["redis"],
    )


async def shutdown(ctx: dict[str, Any]) -> None:
    deps: JobDeps | None = ctx.get("deps")
    if deps is not None:
        await deps.services.aclose()


DATABASE_RETRY_DEFER_S = (2, 4, 8, 15, 30, 60)
"""How long a job waits before its next try after the database was unreachable (then 60 s each time)."""


async def run_job(ctx: dict[str, Any], job_id: str) -> None:
    """Run one job of the job table (its row says what kind and with what payload). Where the database is
    unreachable (restarting) at any step, the job is not failed: arq runs it again after a pause, and it
    resumes from its checkpoints (before, a job whose end fell in the outage stayed `running` for good)."""
    try:
        await execute_job(job_id, ctx["deps"], HANDLERS, transient=(OperationalError,))
    except OperationalError as exc:
        tries = int(ctx.get("job_try") or 1)
        if tries >= WorkerSettings.max_tries:  # arq runs it no more: say so in its row, if the database listens
            try:
                JobRecorder(ctx["deps"].factory, job_id).fail(f"database unavailable in {tries} tries: {exc}")
            except OperationalError:
                log.error("job given up, its row not updated: database unavailable", extra={"job_id": job_id})
            raise
        defer = DATABASE_RETRY_DEFER_S[min(tries, len(DATABASE_RETRY_DEFER_S)) - 1]
        log.warning("database unavailable: job retried", extra={"job_id": job_id, "try": tries, "defer_s": defer})
        raise Retry(defer=defer) from exc


def _redis_settings() -> RedisSettings:
    url = get_settings().redis_url or "redis://127.0.0.1:6379/0"
    return RedisSettings.from_dsn(url)


class WorkerSettings:
    functions = [run_job]
    queue_name = "gateway"
    on_startup = startup
    on_shutdown = shutdown
    job_serializer = staticmethod(dump_job_data)
    job_deserializer = staticmethod(load_job_data)
    redis_settings = _redis_settings()
    max_jobs = 4
    job_timeout = 24 * 3600
    # A job whose worker died, or that found the database unreachable, is retried; `execute_job` resumes it
    # from its checkpoints. Ten tries: the database's retries wait about 5 minutes in all (DATABASE_RETRY_DEFER_S).
    max_tries = 10
