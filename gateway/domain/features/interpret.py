"""Naming features: the job that drives the interpreter over an SAE run, the synchronous
re-interpretation of one feature (the interpreter's `POST /interpret` through ServiceClients),
and storing what they return (several interpretations per feature, the best-scoring one shown,
family names from their parent's and children's labels)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select

from artifacts import ArtifactStore
from contracts.jobs import JobOut
from contracts.interpret import (BackendOptions, CorpusRef, FamilyLabel, FeatureInterpretations, InterpretRequest,
                                 InterpretResult, InterpretRunPayload, InterpretRunResult, LabelEmbedding,
                                 ReinterpretOut, ReinterpretRequest, ScoringConfig)
from contracts.runs import InterpretationOut
from contracts.sae import FeatureFamily
from gateway import embedded
from gateway.db import refresh_statistics, session_scope
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.service import Principal, audit
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.models import Family, Interpretation
from gateway.domain.features.names import SHARED_NAME, NameChoice, distinct_names
from gateway.domain.jobs.runner import JobContext
from gateway.domain.jobs.service import submit
from gateway.domain.jobs.service_jobs import run_service_job
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.models import EmbeddingRun
from gateway.domain.runs.query_model import query_embedding
from gateway.search import repo as search_repo
from gateway.services import ServiceError

KIND = "interpret_run"


class InterpretationRequest(BaseModel):
    """POST /api/v1/sae-runs/{id}/interpretations: name every feature (or some) with these back-ends."""

    backends: list[BackendOptions] | None = Field(
        default=None, min_length=1, max_length=3,
        description="None: the gateway's configured back-end (PRISMA_NAMING_BACKEND), keywords by default.")
    features: list[int] | None = Field(default=None, max_length=100_000, description="Feature indices; None: all.")


class InterpretJob(BaseModel):
    sae_run_id: int
    request: InterpretationRequest


def _corpus_ref(session: Any, sae_run_id: int, *, naming: bool = False) -> tuple[CorpusRef, EmbeddingRun]:
    """Where the interpreter reads documents, vectors, chunks (none for imported vectors) and codes;
    and the embedding run, whose `query_embedding` says how labels are embedded. For `naming`, an
    SAE run with segment codes names its features on segments (services/interpreter/corpus.py
    segment_corpus); the feature page's documents stay documents."""
    sae = run_repo.get_sae_run(session, run_id=sae_run_id)
    emb = run_repo.get_embedding_run(session, run_id=sae.embedding_run_id)
    ds = dataset_repo.get_dataset(session, dataset_id=emb.dataset_id)
    snapshot = artifact_repo.get(session, artifact_id=ds.snapshot_artifact_id)
    arts = (sae.result or {})["artifacts"]
    ref = CorpusRef(
        snapshot_uri=snapshot.uri, embeddings=[s["uri"] for s in emb.result["shards"]],
        chunks=[c["uri"] for c in emb.result.get("chunks", [])], codes_csc_uri=arts["codes_csc"]["uri"],
        sae_uri=arts["cfg"]["uri"].rsplit("/", 1)[0],
    )
    if naming and arts.get("segment_codes") and emb.result.get("segments"):  # artifacts list absent ones as None
        ref = ref.model_copy(update={"segments": [s["uri"] for s in emb.result["segments"]],
                                     "segment_codes_uri": arts["segment_codes"]["uri"]})
    return ref, emb


def interpreter_corpus(session: Any, sae_run_id: int) -> CorpusRef:
    """The interpreter's corpus reference for a finished SAE run (the feature page's documents)."""
    return _corpus_ref(session, sae_run_id)[0]


def run_families(session: Any, sae_run_id: int) -> list[FeatureFamily]:
    """The run's families with their members, so that each is named from its parent and children."""
    fams = feature_repo.list_families(session, sae_run_id=sae_run_id)
    members = feature_repo.family_members(session, family_ids=[f.id for f in fams])
    return [FeatureFamily(iteration=f.iteration, parent=f.root_index,
                          children=[m.feature_index for m in members[f.id] if m.feature_index != f.root_index],
                          edges=[(m.parent_index, m.feature_index) for m in members[f.id] if m.parent_index is not None])
            for f in fams]


def corpus_ref(ctx_factory: Any, sae_run_id: int) -> tuple[CorpusRef, list[FeatureFamily], dict[str, Any]]:
    """The interpreter's corpus reference, the run's families, and the label-embedding spec."""
    with session_scope(ctx_factory) as session:
        ref, emb = _corpus_ref(session, sae_run_id, naming=True)
        return ref, run_families(session, sae_run_id), query_embedding(emb)


def record_interpretations(ctx: JobContext, sae_run_id: int, result: InterpretRunResult) -> None:
    """Store every interpretation and point each feature at its best, one shard at a time (a shard's
    records and features in memory, not the run's: 12,288 features' records are hundreds of MB);
    name families. One transaction: a failure stores none of them."""
    with session_scope(ctx.factory) as session:
        for shard in result.shards:
            _record_shard(session, sae_run_id, _read_records(ctx.store, shard.uri))
        distinct_run_names(session, sae_run_id)
        if result.families is not None:
            labels = [FamilyLabel.model_validate(f) for f in json.loads(ctx.store.read_bytes(result.families.uri))]
            names = {(f.iteration, f.parent): f.label for f in labels}
            for fam in session.scalars(select(Family).where(Family.sae_run_id == sae_run_id)):
                fam.label = names.get((fam.iteration, fam.root_index), fam.label)
        session.flush()
        refresh_statistics(session, "interpretations", "features", "families")


def _read_records(store: ArtifactStore, uri: str) -> list[FeatureInterpretations]:
    """The records of one interpretations shard (JSONL)."""
    return [FeatureInterpretations.model_validate_json(line)
            for line in store.read_bytes(uri).decode().splitlines() if line.strip()]


def _record_shard(session: Any, sae_run_id: int, records: list[FeatureInterpretations]) -> None:
    """Add one shard's interpretations and re-pick its features' best; flushed, so that the session
    holds none of them afterwards (its identity map keeps clean rows only by weak reference)."""
    by_index = feature_repo.features_by_index(session, sae_run_id=sae_run_id, indices=[r.feature for r in records])
    named = []
    for rec in records:
        feat = by_index.get(rec.feature, (None, None))[0]
        if feat is None:
            continue
        feat.skip_reason = None if rec.interpretations else (rec.skipped or "no name")[:300]
        if not rec.interpretations:
            continue
        session.add_all(interpretation_rows(feat.id, rec))
        named.append(feat)
    session.flush()  # the shard's rows in one flush, their best picked in one query per 1,000 features
    feature_repo.set_best_interpretations(session, named)
    session.flush()


def interpretation_rows(feature_id: int, rec: FeatureInterpretations) -> list[Interpretation]:
    """ORM rows of a feature's new interpretations; evidence ids and the controls' scores in `evidence`."""
    return [Interpretation(feature_id=feature_id, backend=i.backend, model=i.model, prompt_version=i.prompt_version,
                           label=i.label, description=i.description, score_embedding=i.score_embedding,
                           score_detection=i.score_detection, score=i.score, reliable=i.reliable,
                           threshold=i.threshold,
                           evidence=i.evidence.model_dump() | {"control_embedding": i.control_embedding,
                                                               "control_detection": i.control_detection,
                                                               "score_evidence": i.score_evidence,
                                                               "copies_input": i.copies_input,
                                                               "score_near_miss": i.score_near_miss,
                                                               "precision_curve": i.precision_curve,
                                                               "calibrated_on": i.calibrated_on,
                                                               "calibration": i.calibration,
                                                               "holds_on": i.holds_on,
                                                               "unreliable_reason": i.unreliable_reason,
                                                               "alternatives": [a.model_dump() for a in i.alternatives]},
                           created_at=i.created_at.replace(tzinfo=None))
            for i in rec.interpretations]


def distinct_run_names(session: Any, sae_run_id: int) -> int:
    """One meaning per name (gateway/domain/features/names.py): where reliable features of the run show the
    same name, all but the one it holds best show their first free reliable alternative (the shown row's label,
    scores, threshold and precision curve become the alternative's; the name it replaced stays in its evidence), or keep the
    name marked unreliable; a feature whose own name does not hold shows its best reliable alternative where one is
    free (the reason its name failed kept as `replaced_reason`). Returns how many features changed."""
    rows = search_repo.named_interpretations(session, sae_run_id=sae_run_id)
    by_feature = dict(rows)
    choices = [NameChoice(f, i.label, i.score, i.reliable, i.threshold, list((i.evidence or {}).get("alternatives") or []),
                          (i.evidence or {}).get("holds_on")) for f, i in rows]
    changes = distinct_names(choices)
    for index, alt in changes.items():
        interp = by_feature[index]
        evidence = dict(interp.evidence or {})
        if alt is None:
            interp.reliable = False
            evidence["shared_name"], evidence["unreliable_reason"] = True, SHARED_NAME
        else:
            evidence["replaced_label"] = interp.label
            if not interp.reliable:  # its own name did not hold (an alternative did): say why it was replaced
                evidence["replaced_reason"] = evidence.get("unreliable_reason")
            evidence["alternatives"] = [a for a in evidence.get("alternatives") or [] if a["label"] != alt["label"]]
            evidence["score_near_miss"] = alt.get("score_near_miss")
            # the curve the shown threshold was read from (names recorded before alternatives had one: none)
            evidence["precision_curve"] = alt.get("precision_curve") or []
            evidence["holds_on"] = alt.get("holds_on")
            evidence["unreliable_reason"] = None  # the replaced name's; an alternative is shown only where reliable
            interp.label, interp.score, interp.threshold, interp.reliable = (alt["label"], alt["score"],
                                                                             alt["threshold"], alt["reliable"])
        interp.evidence = evidence
    session.flush()
    return len(changes)


async def interpret_handler(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    job = InterpretJob.model_validate(payload)
    ref, families, spec = await asyncio.to_thread(corpus_ref, ctx.factory, job.sae_run_id)
    svc = InterpretRunPayload(run_id=job.sae_run_id, corpus=ref, artifact_prefix=f"sae-runs/{job.sae_run_id}/interpret-{ctx.job_id}",
                              features=job.request.features, backends=with_backends(job.request, "keywords").backends,
                              families=families, label_embedding=LabelEmbedding(**spec))
    extra = {} if ctx.arq_pool is not None else {"embed_texts": await embedded.label_embedder(spec)}
    raw = await run_service_job(ctx, "interpreter", "interpret_run", svc.model_dump(mode="json"), in_process_ctx=extra)
    result = InterpretRunResult.model_validate(raw)
    await asyncio.to_thread(record_interpretations, ctx, job.sae_run_id, result)
    return {"sae_run_id": job.sae_run_id, "n_named": result.n_named, "n_skipped": result.n_skipped,
            "mean_score": result.mean_score, "unreliable_fraction": result.unreliable_fraction,
            "features_per_min": result.features_per_min}


def with_backends(body: InterpretationRequest, default: str) -> InterpretationRequest:
    """`body` with its back-ends named: the configured `default` where the request names none."""
    if body.backends is not None:
        return body
    return body.model_copy(update={"backends": [BackendOptions(backend=default)]})


async def start_interpretation(app_state: Any, sae_run_id: int, body: InterpretationRequest, principal: Principal,
                               request_id: str | None) -> JobOut:
    body = with_backends(body, app_state.settings.naming_backend)
    with session_scope(app_state.factory) as session:
        run = run_repo.get_sae_run(session, run_id=sae_run_id)
        if run is None or run.status != "succeeded":
            raise RunInputError(f"sae_run: SAE run {sae_run_id} has not succeeded", field="sae_run_id", status_code=409)
        bad = [i for i in body.features or [] if not 0 <= i < (run.n_latents or 0)]
        if bad:
            raise RunInputError(f"features: index {bad[0]} is out of range 0..{run.n_latents - 1}", field="features")
        query_embedding(run_repo.get_embedding_run(session, run_id=run.embedding_run_id))  # labels must be embeddable
        audit(session, principal, "interpretation.create", target_type="sae_run", target_id=sae_run_id,
              request_id=request_id, details={"backends": [b.backend for b in body.backends]})
    return await submit(app_state.factory, app_state.runner, kind=KIND, queue="gateway",
                        payload=InterpretJob(sae_run_id=sae_run_id, request=body), created_by_key_id=principal.key_id)


CONTROLS = 40
"""Other features' labels sent for the random-label control (the interpreter draws one)."""


def _reinterpret_request(factory: Any, sae_run_id: int, index: int, body: ReinterpretRequest) -> InterpretRequest:
    """Checks the run has succeeded (409) and builds the interpreter's request for one feature."""
    with session_scope(factory) as session:
        run = run_repo.get_sae_run(session, run_id=sae_run_id)
        if run is None:
            raise RunInputError(f"SAE run {sae_run_id} not found", field="run_id", status_code=404)
        n = run.n_latents or 0
        if not 0 <= index < n:
            raise RunInputError(f"feature index {index} is out of range: SAE run {sae_run_id} has features 0..{n - 1}",
                                field="index", status_code=404)
        if run.status != "succeeded":
            raise RunInputError(f"sae_run: SAE run {sae_run_id} has not succeeded", field="sae_run_id", status_code=409)
        ref, emb = _corpus_ref(session, sae_run_id, naming=True)
        spec = query_embedding(emb)
        controls: list[str] = []
        for reliability in ("reliable", "unreliable"):
            rows, _ = feature_repo.list_features(session, sae_run_id=sae_run_id, sort="index", limit=CONTROLS,
                                                 offset=0, reliability=reliability)
            controls += [best.label for f, best in rows if best is not None and f.index != index]
    return InterpretRequest(corpus=ref, feature=index, label_embedding=LabelEmbedding(**spec),
                            backend=BackendOptions(**body.model_dump(exclude={"detection"})),
                            scoring=ScoringConfig(detection=body.detection), control_labels=controls[:CONTROLS])


def _store_reinterpretation(factory: Any, sae_run_id: int, result: InterpretResult, principal: Principal,
                            request_id: str | None) -> ReinterpretOut:
    """Add the new interpretations, re-pick the feature's best among all of its names, audit."""
    with session_scope(factory) as session:
        feat = feature_repo.features_by_index(session, sae_run_id=sae_run_id, indices=[result.feature])
        feature = feat[result.feature][0] if result.feature in feat else None
        if feature is None:
            raise RunInputError(f"index: SAE run {sae_run_id} has no statistics for feature {result.feature}",
                                field="index", status_code=409)
        rows = interpretation_rows(feature.id, result)
        session.add_all(rows)
        session.flush()
        feature_repo.set_best_interpretation(session, feature=feature)
        session.flush()
        distinct_run_names(session, sae_run_id)
        best = next((i for i in feature_repo.interpretations_of(session, feature_id=feature.id)
                     if i.id == feature.best_interpretation_id), None)
        audit(session, principal, "interpretation.create", target_type="sae_run", target_id=sae_run_id,
              request_id=request_id, details={"feature": result.feature, "created": len(rows)})
        return ReinterpretOut(feature=result.feature, created=[InterpretationOut.model_validate(r) for r in rows],
                              best=InterpretationOut.model_validate(best) if best else None, errors=result.errors)


async def reinterpret_feature(app_state: Any, sae_run_id: int, index: int, body: ReinterpretRequest,
                              principal: Principal, request_id: str | None) -> ReinterpretOut:
    """Name one feature again now, through the interpreter's `POST /interpret` (in embedded mode the
    same request goes through the in-process ASGI transport); store and re-pick the best."""
    request = await asyncio.to_thread(_reinterpret_request, app_state.factory, sae_run_id, index, body)
    raw = await app_state.services.post("interpreter", "/interpret", request.model_dump(mode="json"))
    result = InterpretResult.model_validate(raw)
    if not result.interpretations and result.errors:  # the back-end failed after its retries
        raise ServiceError("interpreter", 502, "; ".join(result.errors))
    if not result.interpretations:  # e.g. it fires on too few documents to be named
        raise RunInputError(f"index: feature {index} cannot be named: {result.skipped}", field="index")
    return await asyncio.to_thread(_store_reinterpretation, app_state.factory, sae_run_id, result, principal,
                                   request_id)
