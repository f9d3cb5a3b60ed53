"""The gateway's arq worker (queue `gateway`): runs pipeline jobs from the job table.

`prisma worker gateway` starts it. Heavy resources (engine, store, service clients) are made
once in `on_startup` and kept in arq's `ctx`.
"""

from __future__ import annotations

from typing import Any

from arq.connections import RedisSettings

import gateway.models  # noqa: F401 - every ORM model registered, so foreign keys resolve in this process
from artifacts import ArtifactStore
from gateway.config import get_settings
from gateway.db import session_factory
from contracts.jobs import dump_job_data, load_job_data
from gateway.domain.jobs.handlers import HANDLERS
from gateway.domain.jobs.runner import JobDeps, execute_job
from gateway.logging import configure_logging
from gateway.services import ServiceClients


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


async def run_job(ctx: dict[str, Any], job_id: str) -> None:
    """Run one job of the job table (its row says what kind and with what payload)."""
    await execute_job(job_id, ctx["deps"], HANDLERS)


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
    # A job whose worker died is retried; `execute_job` resumes it from its checkpoints.
    max_tries = 5
