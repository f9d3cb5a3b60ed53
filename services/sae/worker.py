"""arq worker for the `sae` queue: jobs only; the work runs in services.sae.pipeline.

Payloads and results are JSON (never pickle). Training runs in a thread; progress goes to
the Redis key `prisma:progress:<job id>`; a cancelled job makes the thread checkpoint and
stop, and the retried job resumes from that checkpoint.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import torch
from arq.connections import RedisSettings

from artifacts import ArtifactStore
from contracts.append import SaeRestatsPayload
from contracts.jobs import Progress, dump_job_data, load_job_data, progress_key
from contracts.sae import SaeImportPayload, SaeSweepPayload, SaeTrainPayload
from services.sae.config import SaeSettings, get_settings
from services.sae.pipeline import analyse_imported_sae, train_sae
from services.sae.restats import restats

QUEUE = "sae"


async def startup(ctx: dict[str, Any]) -> None:
    settings: SaeSettings = ctx.get("settings") or get_settings()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    ctx["settings"] = settings
    ctx["store"] = ArtifactStore(settings.artifact_root)


async def _in_thread(ctx: dict[str, Any], work) -> Any:
    """Run `work(on_progress, should_stop)` in a thread, publishing progress, honouring cancel."""
    loop = asyncio.get_running_loop()
    key, ttl = progress_key(ctx["job_id"]), ctx["settings"].progress_ttl_s
    stop = threading.Event()
    # Embedded mode: the gateway runs this in-process with its own `report` and `should_stop`.
    report, external_stop = ctx.get("report"), ctx.get("should_stop")

    def on_progress(progress: Progress) -> None:
        if report is not None:
            report(progress)
            return
        asyncio.run_coroutine_threadsafe(ctx["redis"].set(key, progress.model_dump_json(), ex=ttl), loop)

    def should_stop() -> bool:
        return stop.is_set() or bool(external_stop and external_stop())

    task = asyncio.ensure_future(asyncio.to_thread(work, on_progress, should_stop))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        stop.set()  # the thread checkpoints at its next step and raises TrainingStopped
        await asyncio.wait([task], timeout=60)
        raise


async def sae_train(ctx: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Train one SAE and analyse its codes; returns SaeTrainResult as JSON."""
    job = SaeTrainPayload.model_validate(payload)
    result = await _in_thread(
        ctx, lambda progress, stop: train_sae(job, ctx["store"], on_progress=progress, should_stop=stop)
    )
    return result.model_dump(mode="json")


async def sae_import(ctx: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Check, store and analyse an SAE trained elsewhere (no training); returns SaeTrainResult as JSON."""
    job = SaeImportPayload.model_validate(payload)
    result = await _in_thread(ctx, lambda progress, stop: analyse_imported_sae(job, job.source_prefix, ctx["store"]))
    return result.model_dump(mode="json")


async def sae_sweep(ctx: dict[str, Any], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Several SAEs on one embedding run, one after the other; finished ones are not redone."""
    sweep = SaeSweepPayload.model_validate(payload)
    results = []
    for job in sweep.payloads():
        result = await _in_thread(
            ctx, lambda progress, stop, job=job: train_sae(job, ctx["store"], on_progress=progress,
                                                           should_stop=stop)
        )
        results.append(result.model_dump(mode="json"))
    return results


async def sae_restats(ctx: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A run's statistics over all its codes (after an extension); returns SaeRestatsResult as JSON."""
    job = SaeRestatsPayload.model_validate(payload)
    result = await _in_thread(ctx, lambda progress, stop: restats(job, ctx["store"]))
    return result.model_dump(mode="json")


class WorkerSettings:
    """`arq services.sae.worker.WorkerSettings`."""

    functions = [sae_train, sae_sweep, sae_import, sae_restats]
    queue_name = QUEUE
    on_startup = startup
    job_serializer = staticmethod(dump_job_data)
    job_deserializer = staticmethod(load_job_data)
    redis_settings = RedisSettings.from_dsn(get_settings().redis_url)
    job_timeout = get_settings().job_timeout_s
    max_jobs = 1  # one training at a time per worker: it uses every core (or the GPU)
