"""Running a service's job (embedder, sae, interpreter) from a gateway job.

Distributed mode: the job goes to the service's arq queue; progress comes back through the
Redis key the service worker writes (`prisma:progress:<arq job id>`) and is copied to the job
table. Embedded mode: the service's own worker function runs in this process (`gateway.embedded`),
with a `report` callback in its ctx instead of Redis — the same function either way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from contracts.jobs import Progress, load_job_data, progress_key
from gateway import embedded
from gateway.domain.jobs.runner import JobContext
from gateway.leased_worker import REDIS_DOWN

POLL_S = 0.5


class ServiceJobFailed(RuntimeError):
    pass


async def run_service_job(
    ctx: JobContext, service: str, function: str, payload: dict[str, Any], *, in_process_ctx: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run `function` of `service` on `payload`; returns its JSON result, reporting progress.
    `in_process_ctx` adds to the worker's ctx in embedded mode (e.g. an in-process embedder)."""
    if ctx.arq_pool is not None:
        return await _run_on_queue(ctx, service, function, payload)
    return await _run_in_process(ctx, service, function, payload, in_process_ctx or {})


async def _run_in_process(
    ctx: JobContext, service: str, function: str, payload: dict[str, Any], extra: dict[str, Any],
) -> dict[str, Any]:
    # The gateway's store: in embedded mode every component shares one artifact root.
    job_ctx = {"store": ctx.store, "job_id": ctx.job_id, "report": ctx.report,
               "should_stop": ctx.recorder.cancel_requested, **extra}
    return await embedded.run_worker_function(service, function, payload, job_ctx)


async def _run_on_queue(ctx: JobContext, service: str, function: str, payload: dict[str, Any]) -> dict[str, Any]:
    from arq.jobs import Job, JobStatus

    attempt = ctx.recorder.load().attempts
    arq_id = f"{ctx.job_id}:{service}#{attempt}"
    await ctx.arq_pool.enqueue_job(function, payload, _job_id=arq_id, _queue_name=service)
    job = Job(arq_id, ctx.arq_pool, _deserializer=load_job_data)
    while True:
        try:
            status = await job.status()
            raw = await ctx.arq_pool.get(progress_key(arq_id))
        except REDIS_DOWN:  # Redis restarting: the job lives on in its queue; ask again
            await asyncio.sleep(POLL_S * 4)
            continue
        if raw:
            await asyncio.to_thread(ctx.report, Progress.model_validate_json(raw))
        if status == JobStatus.complete:
            info = await job.result_info()
            if info is None or not info.success:
                raise ServiceJobFailed(f"{service}.{function} failed: {info.result if info else 'no result'}")
            return info.result
        if await asyncio.to_thread(ctx.recorder.cancel_requested):
            await job.abort(timeout=10)
            ctx.check_cancelled()
        await asyncio.sleep(POLL_S)
