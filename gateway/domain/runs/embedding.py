"""Embedding runs: create one (validated), and the job handler that drives the embedder."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ValidationError

from contracts.embed import EmbedJobPayload, EmbedJobResult, EmbeddingRunSpec
from contracts.model_allowlist import ModelNotAllowed, resolve_allowed
from contracts.runs import EmbeddingRunCreate
from gateway.db import session_scope, utcnow
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.service import Principal, audit
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.jobs.runner import JobContext
from gateway.domain.runs import repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.jobs import run_service_job_for, start_run_job
from gateway.domain.runs.models import EmbeddingRun
from gateway.search import text_index
from gateway.services import ServiceClients, ServiceError

KIND = "embedding_run"


class EmbeddingRunJob(BaseModel):
    """The gateway job: which run to compute (everything else is in the run's row)."""

    run_id: int


SEGMENT_CHOICES = ("none", "clause", "sentence", "word", "token")


def embedding_request(dataset_id: int, *, segments: str = "none", segments_field: str = "segments",
                      **spec: Any) -> EmbeddingRunCreate:
    """The run a form or the command line asks for, its segments as one choice (none, or the unit);
    a refused choice or spec is a RunInputError whose message starts with the field's name
    (`segments_field`: how the caller's user spells that one, e.g. '--segments')."""
    if segments not in SEGMENT_CHOICES:
        raise RunInputError(f"{segments_field}: {segments!r} is not one of {', '.join(SEGMENT_CHOICES)}",
                            field="segments")
    unit = {} if segments == "none" else {"segment_unit": segments}
    try:
        return EmbeddingRunCreate(dataset_id=dataset_id, segments=segments != "none", **unit, **spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        raise RunInputError(f"{field}: {first['msg'].removeprefix('Value error, ')}", field=field) from None


def check_allowed_model(name: str | None, *, field: str) -> None:
    """A 422 naming `field` and listing the allowed embedding models, for a name outside PRISMA_MODELS."""
    if name not in (None, "", "default"):
        try:
            resolve_allowed(name, kind="encoder", field=field)
        except ModelNotAllowed as exc:
            raise RunInputError(f"{field}: {exc}", field=field) from None


async def check_model(services: ServiceClients, spec: EmbeddingRunSpec) -> EmbeddingRunSpec:
    """Ask the embedder to load the model now, so that a wrong name is a 422 here, not a failed job;
    returns the spec with the model's own name for 'default' and the prompt it puts before each
    chunk, so that the run keeps both if the default changes. A name outside the allowlist is
    refused first, without a call (or the embedder's start-up)."""
    check_allowed_model(spec.model, field="model")
    try:
        out = await services.post("embedder", "/embed", {"texts": ["ok"], "model": spec.model, "pooling": spec.pooling,
                                                         "prompt_name": spec.prompt_name})
    except ServiceError as exc:
        field = "prompt_name" if str(exc.detail).startswith("prompt_name") else "model"
        raise RunInputError(f"{field}: {exc.detail}", field=field) from None
    return spec.model_copy(update={"model": out.get("model_name") or spec.model,
                                   "prompt_name": out.get("prompt_name")})


async def create_embedding_run(app_state: Any, body: EmbeddingRunCreate, principal: Principal, request_id: str | None) -> tuple[EmbeddingRun, bool]:
    """The run for this dataset and spec (a new one, or the same work already under way / done)."""
    spec = EmbeddingRunSpec.model_validate(body.model_dump(exclude={"dataset_id"}))
    with session_scope(app_state.factory) as session:
        ds = dataset_repo.get_dataset(session, dataset_id=body.dataset_id)
        if ds is None or not principal.sees(ds.project_id):  # another project's: as if it did not exist
            raise RunInputError(f"dataset_id: dataset {body.dataset_id} does not exist", field="dataset_id")
        if ds.n_documents == 0 or ds.snapshot_artifact_id is None:
            raise RunInputError(f"dataset_id: dataset {body.dataset_id} has no documents", field="dataset_id")
    spec = await check_model(app_state.services, spec)
    spec_json = spec.model_dump(mode="json")
    with session_scope(app_state.factory) as session:
        existing = repo.find_embedding_run(session, dataset_id=body.dataset_id, spec=spec_json)
        if existing is not None:
            return existing, False
        run = repo.add_embedding_run(
            session, dataset_id=body.dataset_id, model=spec.model, pooling=spec.pooling, normalize=spec.normalize,
            max_length=spec.max_length, spec=spec_json, status="queued",
        )
        audit(session, principal, "embedding_run.create", target_type="embedding_run", target_id=run.id,
              request_id=request_id, details={"dataset_id": body.dataset_id, "model": spec.model})
    run = await start_run_job(app_state, run, kind=KIND, payload=EmbeddingRunJob(run_id=run.id), principal=principal)
    return run, True


def _prepare(ctx: JobContext, run_id: int) -> EmbedJobPayload:
    with session_scope(ctx.factory) as session:
        run = repo.get_embedding_run(session, run_id=run_id)
        if run is None:
            raise LookupError(f"embedding run {run_id} does not exist")
        ds = dataset_repo.get_dataset(session, dataset_id=run.dataset_id)
        snapshot = artifact_repo.get(session, artifact_id=ds.snapshot_artifact_id)
        run.status = "running"
        return EmbedJobPayload(
            run_id=run.id, snapshot_uri=snapshot.uri, artifact_prefix=f"embedding-runs/{run.id}",
            spec=EmbeddingRunSpec.model_validate(run.spec),
        )


def _record_result(ctx: JobContext, run_id: int, result: EmbedJobResult) -> None:
    with session_scope(ctx.factory) as session:
        run = repo.get_embedding_run(session, run_id=run_id)
        for info in [*result.shards, *result.chunks, *result.segments]:
            artifact_repo.record(session, info=info, owner_type="embedding_run", owner_id=run_id)
        run.status, run.finished_at = "succeeded", utcnow()
        run.model_path, run.dim, run.max_length = result.model_path, result.dim, result.max_length
        run.n_documents, run.n_chunks, run.n_tokens = result.n_documents, result.n_chunks, result.n_tokens
        run.docs_per_s = result.docs_per_s
        run.result = result.model_dump(mode="json")


async def embedding_run_handler(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    job = EmbeddingRunJob.model_validate(payload)
    svc_payload = await asyncio.to_thread(_prepare, ctx, job.run_id)
    raw = await run_service_job_for(ctx, EmbeddingRun, job.run_id, "embedder", "embed_run", svc_payload)
    result = EmbedJobResult.model_validate(raw)
    await asyncio.to_thread(_record_result, ctx, job.run_id, result)
    await asyncio.to_thread(text_index.build_after_run, ctx.factory, ctx.store, ctx.settings, job.run_id)
    return {"run_id": job.run_id, "n_documents": result.n_documents, "n_chunks": result.n_chunks,
            "shards_computed": result.shards_computed, "shards_reused": result.shards_reused}
