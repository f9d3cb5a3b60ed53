"""arq worker for the `interpreter` queue: jobs only; the work runs in services.interpreter.runs.

Payloads and results are JSON (never pickle). Progress goes to `ctx["report"]` when the
gateway runs the job in-process (embedded mode), else to the Redis key
`prisma:progress:<job id>`. A stopped or cancelled job keeps its finished shards; the
retried job resumes after them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from arq.connections import RedisSettings

from artifacts import ArtifactStore
from contracts.interpret import InterpretRunPayload
from contracts.jobs import Progress, dump_job_data, load_job_data, progress_key
from services.interpreter.config import InterpreterSettings, get_settings
from services.interpreter.embedder_client import http_embedder
from services.interpreter.runs import name_run

log = logging.getLogger(__name__)
QUEUE = "interpreter"


async def startup(ctx: dict[str, Any]) -> None:
    settings: InterpreterSettings = ctx.get("settings") or get_settings()
    token = settings.service_token.get_secret_value() if settings.service_token else None
    if "embed_texts" not in ctx:  # over HTTP; the embedding run's own query embedding where a job names it
        ctx["embed_texts"] = ctx["configured_embed_texts"] = http_embedder(
            settings.embedder_url, model=settings.embed_model, token=token)
    ctx.update(settings=settings, store=ArtifactStore(settings.artifact_root), service_token=token)


async def shutdown(ctx: dict[str, Any]) -> None:
    """Close the HTTP clients of the label embedders this worker made."""
    for embed in [ctx.get("configured_embed_texts"), *ctx.get("label_embedders", {}).values()]:
        if embed is not None:
            embed.close()


def label_embedder(ctx: dict[str, Any], job: InterpretRunPayload) -> Any:
    """The job's label embedder: the in-process one embedded mode hands over, else the embedder service asked
    as the job's `label_embedding` says (the run's model and query prompt), else as configured. One HTTP
    client per distinct label embedding, kept for the worker's life."""
    embed = ctx.get("embed_texts")
    spec = job.label_embedding
    if spec is None or embed is None or embed is not ctx.get("configured_embed_texts"):
        return embed
    cache = ctx.setdefault("label_embedders", {})
    key = spec.model_dump_json()
    if key not in cache:
        cache[key] = http_embedder(ctx["settings"].embedder_url, token=ctx.get("service_token"), **spec.model_dump())
    return cache[key]


async def interpret_run(ctx: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Name the features of an SAE run (resuming from its shards); returns InterpretRunResult as JSON."""
    job = InterpretRunPayload.model_validate(payload)
    report, external_stop = ctx.get("report"), ctx.get("should_stop")
    settings: InterpreterSettings = ctx["settings"]
    pending: set[asyncio.Future] = set()

    def on_progress(progress: Progress) -> None:
        if report is not None:
            report(progress)
            return
        task = asyncio.ensure_future(ctx["redis"].set(progress_key(ctx["job_id"]), progress.model_dump_json(),
                                                      ex=settings.progress_ttl_s))
        pending.add(task)
        task.add_done_callback(pending.discard)

    result = await name_run(job, ctx["store"], settings=settings, embed_texts=label_embedder(ctx, job),
                            on_progress=on_progress, should_stop=external_stop)
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    log.info("interpretation run %s: %d of %d features named", job.run_id, result.n_named, result.n_features)
    return result.model_dump(mode="json")


class WorkerSettings:
    """`arq services.interpreter.worker.WorkerSettings`."""

    queue_name = QUEUE
    functions = [interpret_run]
    on_startup = startup
    on_shutdown = shutdown
    job_serializer = staticmethod(dump_job_data)
    job_deserializer = staticmethod(load_job_data)
    redis_settings = RedisSettings.from_dsn(get_settings().redis_url)
    job_timeout = get_settings().job_timeout_s
    max_jobs = 1
    allow_abort_jobs = True
