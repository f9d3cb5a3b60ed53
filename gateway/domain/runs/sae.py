"""SAE runs: create (one or a sweep, validated), the job handler driving the SAE service, and
loading what it wrote (statistics, families) into the catalogue."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.runs import SaeRunCreate
from contracts.sae import FeatureFamily, SaeTrainPayload, SaeTrainResult
from gateway.db import refresh_statistics, session_scope, utcnow
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.scope import visible
from gateway.domain.auth.service import Principal, audit
from gateway.domain.features import repo as feature_repo
from gateway.domain.jobs.runner import JobContext
from gateway.domain.runs import repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.jobs import run_service_job_for, start_run_job
from gateway.domain.runs.models import SaeRun

KIND = "sae_run"


class SaeRunJob(BaseModel):
    run_id: int


def _validate_configs(body: SaeRunCreate, d: int, has_segments: bool = False) -> list[dict[str, Any]]:
    """Each config checked against the data's dimension (k ≤ n ...) and against the embedding run
    (segments are there when a config uses them); 422 names the field."""
    configs = [cfg.resolved(has_segments) for cfg in body.configs()]  # stored explicit: 'auto' follows the run
    for i, cfg in enumerate(configs):
        where = ("sweep", i) if body.sweep and (body.config is None or i > 0) else ("config",)
        try:
            cfg.validate_for_dim(d)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in (*where, *err["loc"]))
            raise RunInputError(f"{field}: {err['msg']} (expansion_factor {cfg.expansion_factor} × d {d})",
                                field=field) from None
        if cfg.uses_segments and not has_segments:
            name = "train_on" if cfg.train_on != "documents" else "document_codes"
            field = ".".join(str(p) for p in (*where, name))
            raise RunInputError(f"{field}: needs segment vectors, and the embedding run was made without "
                                "`segments`", field=field)
    return [c.model_dump(mode="json") for c in configs]


async def create_sae_runs(app_state: Any, body: SaeRunCreate, principal: Principal, request_id: str | None) -> list[SaeRun]:
    with session_scope(app_state.factory) as session:
        emb = repo.get_embedding_run(session, run_id=body.embedding_run_id)
        if emb is None or not visible(session, principal, "embedding_run", emb.id):
            raise RunInputError(f"embedding_run_id: embedding run {body.embedding_run_id} does not exist",
                                field="embedding_run_id")
        if emb.status != "succeeded" or not emb.dim:
            raise RunInputError(f"embedding_run_id: embedding run {emb.id} is {emb.status}, not succeeded",
                                field="embedding_run_id", status_code=409)
        configs = _validate_configs(body, emb.dim, bool((emb.result or {}).get("segments")))
        sweep_id = uuid.uuid4().hex[:12] if len(configs) > 1 else None
        runs = []
        for cfg in configs:
            run = SaeRun(embedding_run_id=emb.id, sweep_id=sweep_id, status="queued", d=emb.dim,
                         n_latents=cfg["expansion_factor"] * emb.dim, k=cfg["k"],
                         config={"sae": cfg, "stats": body.stats.model_dump(mode="json"),
                                 "families": body.families.model_dump(mode="json")})
            session.add(run)
            session.flush()
            runs.append(run)
            audit(session, principal, "sae_run.create", target_type="sae_run", target_id=run.id, request_id=request_id,
                  details={"embedding_run_id": emb.id, "k": cfg["k"], "expansion_factor": cfg["expansion_factor"]})
    return [await start_run_job(app_state, run, kind=KIND, payload=SaeRunJob(run_id=run.id), principal=principal)
            for run in runs]


def _prepare(ctx: JobContext, run_id: int) -> SaeTrainPayload:
    with session_scope(ctx.factory) as session:
        run = repo.get_sae_run(session, run_id=run_id)
        if run is None:
            raise LookupError(f"SAE run {run_id} does not exist")
        emb = repo.get_embedding_run(session, run_id=run.embedding_run_id)
        shards = [ArtifactInfo.model_validate(s) for s in (emb.result or {}).get("shards", [])]
        segments = [ArtifactInfo.model_validate(s) for s in (emb.result or {}).get("segments", [])]
        run.status = "running"
        return SaeTrainPayload(
            run_id=run.id, embeddings=shards, segments=segments, artifact_prefix=f"sae-runs/{run.id}",
            config=run.config["sae"], stats=run.config["stats"], families=run.config["families"],
        )


def feature_rows(store: ArtifactStore, stats_uri: str, sae_run_id: int) -> list[dict[str, Any]]:
    """One row per latent from the service's stats.npz. Each array is read once: an NpzFile reads an array again
    from the zip (checking its CRC) every time it is indexed, which per feature and per array took 18 s for 12,288
    features."""
    with np.load(io.BytesIO(store.read_bytes(stats_uri)), allow_pickle=False) as z:
        s = {k: z[k].tolist() for k in ("density", "mean_activation", "max_activation", "histogram",
                                         "cooc_top_indices", "cooc_top_values", "decoder_top_indices",
                                         "decoder_top_values")}
    rows = []
    for i in range(len(s["density"])):
        co = [(j, round(v, 4)) for j, v in zip(s["cooc_top_indices"][i], s["cooc_top_values"][i]) if j >= 0]
        dec = [(j, round(v, 4)) for j, v in zip(s["decoder_top_indices"][i], s["decoder_top_values"][i]) if j >= 0]
        rows.append({
            "sae_run_id": sae_run_id, "index": i, "density": s["density"][i],
            "mean_activation": s["mean_activation"][i], "max_activation": s["max_activation"][i],
            "histogram": {"counts": s["histogram"][i]},
            "neighbours": {"cooccurring": co, "decoder": dec},
        })
    return rows


def family_rows(families: list[FeatureFamily]) -> list[dict[str, Any]]:
    """Members of each family as (index, parent index, depth), the parent at depth 0."""
    out = []
    for fam in families:
        parent_of = {child: parent for parent, child in fam.edges}
        depth: dict[int, int] = {fam.parent: 0}
        for child in fam.children:  # depth-first order: a child's parent comes before it
            depth[child] = depth.get(parent_of.get(child, fam.parent), 0) + 1
        members = [(fam.parent, None, 0)] + [(c, parent_of.get(c, fam.parent), depth[c]) for c in fam.children]
        out.append({"iteration": fam.iteration, "root_index": fam.parent, "members": members})
    return out


def _record_result(ctx: JobContext, run_id: int, result: SaeTrainResult) -> None:
    features = feature_rows(ctx.store, result.artifacts.stats.uri, run_id)
    raw_families = json.loads(ctx.store.read_bytes(result.artifacts.families.uri))
    families = family_rows([FeatureFamily.model_validate(f) for f in raw_families])
    with session_scope(ctx.factory) as session:
        run = repo.get_sae_run(session, run_id=run_id)
        for info in result.artifacts.model_dump(exclude_none=True).values():  # segment files only with segments
            artifact_repo.record(session, info=ArtifactInfo.model_validate(info), owner_type="sae_run", owner_id=run_id)
        feature_repo.replace_features(session, sae_run_id=run_id, rows=features)
        feature_repo.replace_families(session, sae_run_id=run_id, families=families)
        refresh_statistics(session, "features", "families", "family_members")
        run.status, run.finished_at = "succeeded", utcnow()
        run.d, run.n_latents = result.d, result.num_latents
        run.metrics = result.metrics.model_dump(mode="json")
        run.loss_curve = [p.model_dump(mode="json") for p in result.loss_curve]
        run.result = result.model_dump(mode="json", exclude={"loss_curve"})


async def drive_sae_service(ctx: JobContext, run_id: int, function: str, payload: BaseModel) -> dict[str, Any]:
    """Run an SAE service job for `run_id`, record its result; the run fails or is cancelled with it."""
    raw = await run_service_job_for(ctx, SaeRun, run_id, "sae", function, payload)
    result = SaeTrainResult.model_validate(raw)
    await asyncio.to_thread(_record_result, ctx, run_id, result)
    return {"run_id": run_id, "fvu": result.metrics.fvu, "dead_fraction": result.metrics.dead_fraction,
            "num_families": result.num_families, "steps": result.steps_done}


async def sae_run_handler(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    job = SaeRunJob.model_validate(payload)
    svc_payload = await asyncio.to_thread(_prepare, ctx, job.run_id)
    return await drive_sae_service(ctx, job.run_id, "sae_train", svc_payload)
