"""The embedder's arq worker on the `embedder` queue: `embed_run` jobs. Jobs only.

Run with `arq services.embedder.worker.WorkerSettings`. Payloads and results are JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from arq.connections import RedisSettings
from redis.exceptions import RedisError

from artifacts import ArtifactStore
from contracts.embed import EmbedJobPayload
from contracts.jobs import Progress, dump_job_data, load_job_data, progress_key
from services.embedder.config import get_settings
from services.embedder.encoder import configure_threads
from services.embedder.models import ModelCache
from services.embedder.runs import run_embedding

log = logging.getLogger(__name__)
PROGRESS_TTL_S = 24 * 3600


async def startup(ctx: dict[str, Any]) -> None:
    """Load the default model once; later models join the same cache, keyed by (path, device)."""
    settings = get_settings()
    configure_threads(settings.threads)
    models = ModelCache.shared(settings)  # the embedder app's, where it runs in this process too
    await asyncio.to_thread(models.get, None)
    ctx.update(settings=settings, models=models, store=ArtifactStore(settings.artifact_root))


async def embed_run(ctx: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Embed a dataset snapshot into shards (resuming a killed run); returns EmbedJobResult as JSON.

    On a queue, the run's shards are claimed in Redis and helper jobs let other embedder workers
    take some of them; this job waits for every shard and returns the whole run's result.
    """
    job = EmbedJobPayload.model_validate(payload)
    loop = asyncio.get_running_loop()
    # In embedded mode the gateway runs this same function in-process and passes its own
    # `report` and `should_stop`; on a queue, progress goes to Redis for the gateway to read.
    report, redis = ctx.get("report"), ctx.get("redis")
    key = progress_key(ctx["job_id"])
    stop = threading.Event()
    external_stop = ctx.get("should_stop")

    def on_progress(progress: Progress) -> None:  # called from the run's thread
        if report is not None:
            report(progress)
            return
        future = asyncio.run_coroutine_threadsafe(
            redis.set(key, progress.model_dump_json(), ex=PROGRESS_TTL_S), loop
        )
        future.add_done_callback(_log_failure)

    def should_stop() -> bool:
        return stop.is_set() or bool(external_stop and external_stop())

    claims = None
    if report is None:
        claims = ShardClaims(redis, loop, job.artifact_prefix, ctx["settings"].claim_lease_s)
        await _enqueue_helpers(ctx, job)
    try:
        async with _renewing(claims):
            result = await asyncio.to_thread(
                run_embedding, job, ctx["store"], settings=ctx["settings"], on_progress=on_progress,
                should_stop=should_stop, models=ctx["models"], claim=claims,
            )
    except asyncio.CancelledError:  # aborted or timed out: let the thread stop at its next batch
        stop.set()
        raise
    final = Progress(done=result.n_documents, total=result.n_documents, unit="documents",
                     rate=result.docs_per_s or None, eta_seconds=0.0, message="done")
    if report is not None:
        report(final, force=True)
    else:
        await redis.set(key, final.model_dump_json(), ex=PROGRESS_TTL_S)
    log.info("embedding run %s: %d documents, %d shards computed, %d reused", job.run_id,
             result.n_documents, result.shards_computed, result.shards_reused)
    return result.model_dump(mode="json")


async def embed_run_helper(ctx: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Compute the shards of a run that no other worker holds, then end (the run's job gathers them)."""
    job = EmbedJobPayload.model_validate(payload)
    claims = ShardClaims(ctx["redis"], asyncio.get_running_loop(), job.artifact_prefix,
                         ctx["settings"].claim_lease_s)
    async with _renewing(claims):
        await asyncio.to_thread(run_embedding, job, ctx["store"], settings=ctx["settings"], models=ctx["models"],
                                claim=claims, wait_for_others=False)
    return {"run_id": job.run_id, "shards_computed": len(claims.held)}


async def _enqueue_helpers(ctx: dict[str, Any], job: EmbedJobPayload) -> None:
    # Deterministic ids: a retried run does not add helpers; with one worker they end at once.
    for i in range(ctx["settings"].helpers):
        await ctx["redis"].enqueue_job("embed_run_helper", job.model_dump(mode="json"),
                                       _job_id=f"{ctx['job_id']}:helper{i}", _queue_name=WorkerSettings.queue_name)


class ShardClaims:
    """Shard leases in Redis (SET NX with a TTL, renewed while this worker lives), so that workers
    sharing a run never compute a shard twice, and a dead worker's shard is taken over."""

    def __init__(self, redis: Any, loop: asyncio.AbstractEventLoop, prefix: str, lease_s: float) -> None:
        self.redis, self.loop, self.lease_ms = redis, loop, int(lease_s * 1000)
        self.prefix, self.owner = prefix.rstrip("/"), uuid.uuid4().hex
        self.held: set[str] = set()

    def __call__(self, index: int) -> bool:
        """Called from the run's thread: may this worker compute shard `index`?"""
        key = f"prisma:claim:{self.prefix}:{index}"
        for attempt in range(60):  # Redis restarting: wait for it rather than fail the run
            try:
                got = asyncio.run_coroutine_threadsafe(
                    self.redis.set(key, self.owner, nx=True, px=self.lease_ms), self.loop).result(timeout=30)
                break
            except (RedisError, OSError):
                time.sleep(1.0)
        else:
            raise RuntimeError(f"redis unavailable for a minute while claiming shard {index}")
        if got:
            self.held.add(key)
        return bool(got)

    async def renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            for key in list(self.held):
                with contextlib.suppress(RedisError, OSError):
                    await self.redis.pexpire(key, self.lease_ms)


@contextlib.asynccontextmanager
async def _renewing(claims: ShardClaims | None) -> AsyncIterator[None]:
    task = asyncio.ensure_future(claims.renew()) if claims is not None else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("progress not published: %s", future.exception())


class WorkerSettings:
    """arq settings; one job at a time (a run already uses every core or the GPU)."""

    queue_name = "embedder"
    functions = [embed_run, embed_run_helper]
    on_startup = startup
    redis_settings = RedisSettings.from_dsn(get_settings().redis_url)
    job_serializer = staticmethod(dump_job_data)
    job_deserializer = staticmethod(load_job_data)
    max_jobs = 1
    job_timeout = 24 * 3600
    allow_abort_jobs = True
