"""Extending a finished SAE run to the notes appended to its dataset since: no retraining.

The new notes are embedded and encoded as the run's own (runs/passages.py: the embedder's POST /passages with the
embedding run's spec and segments, then the SAE service's POST /codes with the trained SAE, a note's codes the max
over its segments' where the run pools them), a batch at a time, each batch a checkpoint artifact
(`sae-runs/<id>/extend-<documents>/batch-NNNNN.npz`): a retried job skips the batches it finds. Then the run's codes
are written whole again under that prefix, with what text search reads (runs/extend_search.py), the statistics that count over documents are recomputed over all of
them by the SAE service (`sae_restats`), and one database update switches the run's result to the new artifacts and
its features' statistics; until then every reader sees the old codes. Names and families are not redone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from contracts.append import ExtendOut, ExtendRequest, RunCoverage, SaeRestatsPayload, SaeRestatsResult
from contracts.artifacts import ArtifactInfo
from gateway.db import session_scope, utcnow
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.service import Principal, audit
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.datasets.models import Document
from gateway.domain.jobs.runner import JobContext
from gateway.domain.jobs.service import RateMeter, submit
from gateway.domain.jobs.service_jobs import run_service_job
from gateway.domain.runs import repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.extend_codes import merge, update_feature_stats, write_batch
from gateway.domain.runs.extend_search import APPENDED, SEARCH_ARTIFACTS, build_search, merge_appended
from gateway.domain.runs.models import SaeRun
from gateway.domain.runs.passages import PassageTarget, encode_texts, passage_target
from gateway.domain.runs.sae import feature_rows
from gateway.search import space
from gateway.search.space import SearchNotReady

KIND = "sae_extend"


class SaeExtendJob(BaseModel):
    run_id: int
    to_documents: int = Field(description="The dataset's documents when asked: the run's codes will hold as many.")
    batch_documents: int = Field(default=256, ge=1)


@dataclass(frozen=True)
class Plan:
    target: PassageTarget
    from_documents: int
    codes_uri: str
    artifacts: dict[str, Any]
    prefix: str
    embedding_result: dict[str, Any]  # the embedding run's: its shards and segments, for text search


def encoded_documents(run: SaeRun) -> int:
    return int((run.result or {}).get("num_documents") or 0)


def trained_documents(run: SaeRun) -> int:
    """The documents the SAE learned from: its dataset's first ones (an extension keeps the count)."""
    return int(((run.result or {}).get("extension") or {}).get("trained_documents") or encoded_documents(run))


def coverage(session: Session, run: SaeRun) -> RunCoverage | None:
    """How many of the dataset's documents the run learned from and holds codes for; None before it has codes."""
    if run.status != "succeeded" or not encoded_documents(run):
        return None
    emb = repo.get_embedding_run(session, run_id=run.embedding_run_id)
    n = dataset_repo.get_dataset(session, dataset_id=emb.dataset_id).n_documents
    trained, encoded = trained_documents(run), encoded_documents(run)
    return RunCoverage(trained_documents=trained, encoded_documents=encoded, dataset_documents=n,
                       added_since_training=max(0, n - trained), not_encoded=max(0, n - encoded))


def _target(session: Session, run: SaeRun) -> PassageTarget:
    try:
        return passage_target(session, run, field="run_id")
    except SearchNotReady as exc:
        raise RunInputError(f"run_id: {exc}", field="run_id", status_code=409) from None


async def start_extend(app_state: Any, run_id: int, body: ExtendRequest, principal: Principal,
                       request_id: str | None) -> ExtendOut:
    """Submit the extension (the same run and dataset size twice: one job); 409 when there is nothing to encode."""
    with session_scope(app_state.factory) as session:
        run = repo.get_sae_run(session, run_id=run_id)
        if run is None:
            raise RunInputError(f"SAE run {run_id} not found", field="run_id", status_code=404)
        _target(session, run)  # 409: no codes yet, or vectors imported (no model here embeds a note as they were)
        cov = coverage(session, run)
        if cov is None or cov.not_encoded == 0:
            raise RunInputError(f"run_id: SAE run {run_id} already has codes for every document of its dataset",
                                field="run_id", status_code=409)
        payload = SaeExtendJob(run_id=run_id, to_documents=cov.dataset_documents, batch_documents=body.batch_documents)
        audit(session, principal, "sae_run.extend", target_type="sae_run", target_id=run_id, request_id=request_id,
              details={"from_documents": cov.encoded_documents, "to_documents": cov.dataset_documents})
    job = await submit(app_state.factory, app_state.runner, kind=KIND, queue="gateway", payload=payload,
                       created_by_key_id=principal.key_id)
    return ExtendOut(sae_run_id=run_id, job_id=job.id, from_documents=cov.encoded_documents,
                     to_documents=cov.dataset_documents)


def _plan(ctx: JobContext, job: SaeExtendJob) -> Plan | None:
    """What the job reads, in one session; None when the run already holds `to_documents` codes."""
    with session_scope(ctx.factory) as session:
        run = repo.get_sae_run(session, run_id=job.run_id)
        if run is None:
            raise LookupError(f"SAE run {job.run_id} does not exist")
        if encoded_documents(run) >= job.to_documents:
            return None
        target = _target(session, run)
        artifacts = dict(run.result["artifacts"])
        emb = repo.get_embedding_run(session, run_id=run.embedding_run_id)
        return Plan(target=target, from_documents=encoded_documents(run), codes_uri=artifacts["codes_csr"]["uri"],
                    artifacts=artifacts, prefix=f"sae-runs/{run.id}/extend-{job.to_documents}",
                    embedding_result=dict(emb.result or {}))


def _texts(ctx: JobContext, dataset_id: int, start: int, end: int) -> list[str]:
    """The texts of documents at positions start..end-1, in order."""
    with session_scope(ctx.factory) as session:
        rows = session.execute(select(Document.position, Document.text).where(
            Document.dataset_id == dataset_id, Document.position >= start, Document.position < end)
            .order_by(Document.position)).all()
    if [p for p, _ in rows] != list(range(start, end)):
        raise LookupError(f"dataset {dataset_id} lacks documents at positions {start}..{end - 1}")
    return [t for _, t in rows]


async def _encode_batches(ctx: JobContext, job: SaeExtendJob, plan: Plan) -> list[str]:
    """Every batch's checkpoint, computing those not already written; returns their keys in order."""
    first, size = plan.from_documents, job.batch_documents
    starts = list(range(first, job.to_documents, size))
    keys = [f"{plan.prefix}/batch-{b:05d}.npz" for b in range(len(starts))]
    meter = RateMeter(job.to_documents - first, "documents")
    for b, (start, key) in enumerate(zip(starts, keys)):
        end = min(start + size, job.to_documents)
        if not await asyncio.to_thread(ctx.store.exists, key):  # a resumed job skips the batches it wrote
            await asyncio.to_thread(ctx.check_cancelled)
            texts = await asyncio.to_thread(_texts, ctx, plan.target.dataset_id, start, end)
            encoded = await encode_texts(ctx.services, plan.target, texts, search_vectors=True)
            await asyncio.to_thread(write_batch, ctx.store, key, encoded, start)
        progress = meter.progress(end - first, f"batch {b + 1} of {len(keys)}")
        await asyncio.to_thread(ctx.report, progress, force=b == len(keys) - 1)
    return keys


def _record(ctx: JobContext, job: SaeExtendJob, plan: Plan, merged: dict[str, ArtifactInfo],
            stats: SaeRestatsResult) -> None:
    """The switch: the run's result names the new artifacts and its features get the new statistics, in one
    transaction, only if the run still holds the codes the job started from."""
    rows = feature_rows(ctx.store, stats.stats.uri, job.run_id)
    new = {**merged, **stats.model_dump()}
    with session_scope(ctx.factory) as session:
        run = session.scalar(select(SaeRun).where(SaeRun.id == job.run_id).with_for_update())
        if run.result["artifacts"]["codes_csr"]["uri"] != plan.codes_uri:
            raise RuntimeError(f"SAE run {job.run_id}'s codes changed while it was extended: extend it again")
        for info in new.values():
            artifact_repo.record(session, info=ArtifactInfo.model_validate(info), owner_type="sae_run",
                                 owner_id=job.run_id)
        update_feature_stats(session, sae_run_id=job.run_id, rows=rows)
        extension = {"trained_documents": trained_documents(run), "from_documents": plan.from_documents,
                     "job_id": ctx.job_id, "at": utcnow().isoformat()}
        kept = {k: v for k, v in run.result["artifacts"].items() if k not in SEARCH_ARTIFACTS}  # rebuilt, or none
        artifacts = {**kept, **{k: ArtifactInfo.model_validate(v).model_dump(mode="json") for k, v in new.items()}}
        run.result = {**run.result, "num_documents": job.to_documents, "artifacts": artifacts, "extension": extension}


async def sae_extend_handler(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    job = SaeExtendJob.model_validate(payload)
    plan = await asyncio.to_thread(_plan, ctx, job)
    if plan is None:
        return {"run_id": job.run_id, "documents": job.to_documents, "already": True}
    keys = await _encode_batches(ctx, job, plan)
    merged = await asyncio.to_thread(merge, ctx.store, plan.prefix, plan.artifacts, keys)
    merged[APPENDED] = await asyncio.to_thread(merge_appended, ctx.store, plan.prefix, plan.artifacts, keys)
    merged |= await asyncio.to_thread(build_search, ctx.store, ctx.settings, plan.embedding_result,
                                      merged[APPENDED].uri, plan.prefix)
    with session_scope(ctx.factory) as session:
        config = repo.get_sae_run(session, run_id=job.run_id).config
    restats = SaeRestatsPayload(codes_csr=merged["codes_csr"], sae_uri=plan.target.sae_uri, stats=config["stats"],
                                tau=config["families"]["tau"], artifact_prefix=plan.prefix)
    stats = SaeRestatsResult.model_validate(
        await run_service_job(ctx, "sae", "sae_restats", restats.model_dump(mode="json")))
    await asyncio.to_thread(_record, ctx, job, plan, merged, stats)
    space.clear_cache()  # this process's; another reads the new URIs and reloads
    return {"run_id": job.run_id, "from_documents": plan.from_documents, "documents": job.to_documents,
            "batches": len(keys)}
