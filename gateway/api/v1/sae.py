"""/api/v1/sae-runs: train SAEs (one or a sweep), their metrics, features, neighbours, families; texts encoded."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status

from contracts.append import ExtendOut, ExtendRequest
from contracts.catalog import ErrorOut
from contracts.classify import EncodeOut, EncodeTextsRequest
from contracts.jobs import JobOut
from contracts.runs import (
    FamilyMemberOut, FamilyOut, FamilyPage, FeatureDetail, FeatureOut, FeaturePage, InterpretationOut, Neighbour, SaeRunCreate,
    SaeRunList, SaeRunOut,
)
from contracts.interpret import ReinterpretOut, ReinterpretRequest
from gateway.domain.features.interpret import InterpretationRequest, reinterpret_feature, start_interpretation
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.names import SHARED_NAME
from gateway.domain.runs import repo
from gateway.domain.runs.models import SaeRun
from gateway.domain.runs.encode import encode_run_texts
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.extend import coverage, start_extend
from gateway.domain.runs.sae import create_sae_runs
from gateway.domain.runs.sae_import import import_sae_run
from gateway.domain.runs.training_text import training_text
from gateway.uploads import receive_upload

router = APIRouter(prefix="/sae-runs", tags=["SAE runs"])
NOT_FOUND = {404: {"model": ErrorOut}}


def valid_sae_run(run_id: int, session: SessionDep) -> SaeRun:
    run = repo.get_sae_run(session, run_id=run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"SAE run {run_id} not found")
    return run


SaeRunDep = Annotated[SaeRun, Depends(valid_sae_run)]


def run_summary(run: SaeRun) -> SaeRunOut:
    """A run without its loss curve: a deferred column, not loaded for lists, and not there yet
    for a run just created (which may already be detached from its session)."""
    return SaeRunOut.model_validate({name: getattr(run, name) for name in SaeRunOut.model_fields
                                     if name not in ("loss_curve", "training_text", "coverage")})


def valid_feature_index(run: SaeRunDep, index: int) -> int:
    """A feature index in [0, n); out of range is a 404 that names it and the range."""
    n = run.n_latents or 0
    if not 0 <= index < n:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            detail=f"feature index {index} is out of range: SAE run {run.id} has features 0..{n - 1}")
    return index


@router.post("", response_model=list[SaeRunOut], status_code=status.HTTP_202_ACCEPTED,
             responses={409: {"model": ErrorOut}, 422: {"model": ErrorOut}})
async def new_sae_runs(body: SaeRunCreate, request: Request, principal: CurrentKey, rid: RequestId) -> list[SaeRunOut]:
    """Train one SAE (`config`) or a sweep (`sweep`: several configs, one run each, compared side by side)."""
    runs = await create_sae_runs(request.app.state, body, principal, rid)
    return [run_summary(r) for r in runs]


IMPORT_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file", "embedding_run_id"],
    "properties": {"file": {"type": "string", "format": "binary", "description": "zip of sparsify's folder: cfg.json + sae.safetensors"},
                   "embedding_run_id": {"type": "integer"}}}}}}}


@router.post("/import", response_model=SaeRunOut, status_code=status.HTTP_202_ACCEPTED, openapi_extra=IMPORT_BODY,
             responses={413: {"model": ErrorOut}, 422: {"model": ErrorOut}})
async def import_sae(request: Request, principal: CurrentKey, rid: RequestId) -> SaeRunOut:
    """Import an SAE trained elsewhere (EleutherAI sparsify's cfg.json + sae.safetensors, zipped) on an
    embedding run: it is analysed like a trained one (features, statistics, families), without training."""
    settings = request.app.state.settings
    upload = await receive_upload(request, tmp_dir=settings.uploads_dir, max_bytes=settings.max_upload_bytes)
    try:
        raw_id = upload.fields.get("embedding_run_id", "")
        if not raw_id.strip().isdigit():
            raise RunInputError("embedding_run_id: an integer form field is required", field="embedding_run_id")
        run = await import_sae_run(request.app.state, zip_path=upload.file_path, filename=upload.filename,
                                   embedding_run_id=int(raw_id), principal=principal, request_id=rid)
    finally:
        upload.cleanup()
    return run_summary(run)


@router.get("", response_model=SaeRunList)
def list_sae_runs(
    session: SessionDep, principal: CurrentKey, embedding_run_id: Annotated[int | None, Query()] = None,
    sweep_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 200, offset: Annotated[int, Query(ge=0)] = 0,
) -> SaeRunList:
    """A page of the runs the caller may read, newest first (of one embedding run or one sweep if asked)."""
    runs, total = repo.page_sae_runs(session, embedding_run_id=embedding_run_id, sweep_id=sweep_id,
                                     project_ids=principal.project_ids, limit=limit, offset=offset)
    return SaeRunList(items=[run_summary(r) for r in runs], total=total)


@router.get("/{run_id}", response_model=SaeRunOut, responses=NOT_FOUND)
def get_sae_run(run: SaeRunDep, session: SessionDep, _: CurrentKey) -> SaeRunOut:
    return SaeRunOut.model_validate(run).model_copy(update={"training_text": training_text(session, run),
                                                           "coverage": coverage(session, run)})


@router.post("/{run_id}/extend", response_model=ExtendOut, status_code=status.HTTP_202_ACCEPTED,
             responses={**NOT_FOUND, 409: {"model": ErrorOut}})
async def extend_sae_run(run_id: int, request: Request, principal: CurrentKey, rid: RequestId,
                         body: ExtendRequest | None = None) -> ExtendOut:
    """Encode the documents appended to the run's dataset since it was trained, with its trained SAE (no
    retraining), and recompute its feature statistics over all its codes: a job (GET /jobs/{job_id})."""
    return await start_extend(request.app.state, run_id, body or ExtendRequest(), principal, rid)


@router.get("/{run_id}/features", response_model=FeaturePage, responses=NOT_FOUND)
def list_features(
    run: SaeRunDep, session: SessionDep, _: CurrentKey,
    sort: Annotated[Literal["index", "density", "max_activation", "mean_activation", "score"], Query()] = "density",
    q: Annotated[str | None, Query(max_length=200, description="Only features whose shown label or description contains this (case-insensitive).")] = None,
    reliability: Annotated[Literal["reliable", "unreliable", "unnamed"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> FeaturePage:
    rows, total = feature_repo.list_features(session, sae_run_id=run.id, sort=sort, limit=limit, offset=offset,
                                             text=q.strip() if q else None, reliability=reliability)
    items = [feature_out(f, best) for f, best in rows]
    return FeaturePage(items=items, total=total, limit=limit, offset=offset)


@router.get("/{run_id}/features/{index}", response_model=FeatureDetail, responses=NOT_FOUND)
def get_feature(
    run: SaeRunDep, index: Annotated[int, Depends(valid_feature_index)], session: SessionDep, _: CurrentKey,
) -> FeatureDetail:
    found = feature_repo.get_feature(session, sae_run_id=run.id, index=index)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"SAE run {run.id} has no statistics yet ({run.status})")
    feat, best = found
    return FeatureDetail(
        **feature_out(feat, best).model_dump(),
        histogram=feat.histogram.get("counts", []),
        cooccurring=[Neighbour(index=j, value=v) for j, v in feat.neighbours.get("cooccurring", [])],
        decoder_similar=[Neighbour(index=j, value=v) for j, v in feat.neighbours.get("decoder", [])],
        families=feature_repo.families_of_feature(session, sae_run_id=run.id, index=index),
    )


@router.post("/{run_id}/interpretations", response_model=JobOut, status_code=status.HTTP_202_ACCEPTED,
             responses={409: {"model": ErrorOut}, 422: {"model": ErrorOut}})
async def interpret(run_id: int, body: InterpretationRequest, request: Request, principal: CurrentKey, rid: RequestId) -> JobOut:
    """Name every feature of the run (or `features`) with the chosen back-ends; each name is scored on
    held-out documents and the best one is shown. A job: follow it at /api/v1/jobs/{id}."""
    return await start_interpretation(request.app.state, run_id, body, principal, rid)


@router.get("/{run_id}/features/{index}/interpretations", response_model=list[InterpretationOut], responses=NOT_FOUND)
def feature_interpretations(
    run: SaeRunDep, index: Annotated[int, Depends(valid_feature_index)], session: SessionDep, _: CurrentKey,
) -> list[InterpretationOut]:
    """Every interpretation of a feature, best first (back-end, model, prompt version, scores, evidence ids)."""
    found = feature_repo.get_feature(session, sae_run_id=run.id, index=index)
    if found is None:
        return []
    return [InterpretationOut.model_validate(i) for i in feature_repo.interpretations_of(session, feature_id=found[0].id)]


@router.post("/{run_id}/features/{index}/interpretations", response_model=ReinterpretOut,
             status_code=status.HTTP_201_CREATED,
             responses={**NOT_FOUND, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}, 502: {"model": ErrorOut},
                        503: {"model": ErrorOut}})
async def reinterpret(
    run_id: int, index: int, body: ReinterpretRequest, request: Request, principal: CurrentKey, rid: RequestId,
) -> ReinterpretOut:
    """Re-interpret one feature now (synchronous): the chosen back-end names it, the name is scored on
    held-out documents and stored with the feature's others, and the best of all is shown. An unknown
    run or an index out of range is a 404 that names it."""
    # no SessionDep here: the request's session would hold SQLite's write lock (the key's last use)
    # for the whole call, while the interpretations are stored in sessions of their own
    return await reinterpret_feature(request.app.state, run_id, index, body, principal, rid)


def feature_out(feat, best) -> FeatureOut:  # noqa: ANN001
    extra = ({"label": best.label, "score": best.score, "reliable": best.reliable, "threshold": best.threshold,
              "unreliable_reason": unreliable_reason(best)} if best is not None else {})
    return FeatureOut.model_validate(feat).model_copy(update=extra)


def unreliable_reason(best) -> str | None:  # noqa: ANN001
    """Why `best` (an interpretation row) is unreliable, from its evidence; None when it is reliable or unscored."""
    if best.reliable is not False:
        return None
    evidence = best.evidence or {}  # a shared name recorded before its reason was stored: the same words
    return evidence.get("unreliable_reason") or (SHARED_NAME if evidence.get("shared_name") else None)


@router.get("/{run_id}/families", response_model=FamilyPage, responses=NOT_FOUND)
def list_families(
    run: SaeRunDep, session: SessionDep, _: CurrentKey,
    iteration: Annotated[int | None, Query(ge=0, description="Only this iteration's families (0: the first).")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> FamilyPage:
    """A page of the run's feature families, by iteration and then largest first, each with its members."""
    fams = feature_repo.list_families(session, sae_run_id=run.id, iteration=iteration, limit=limit, offset=offset)
    counts = feature_repo.family_counts(session, sae_run_id=run.id)
    total = sum(counts.values()) if iteration is None else counts.get(iteration, 0)
    return FamilyPage(items=families_out(session, fams), total=total, limit=limit, offset=offset)


@router.get("/{run_id}/families/{family_id}", response_model=FamilyOut, responses=NOT_FOUND)
def get_family(run: SaeRunDep, family_id: int, session: SessionDep, _: CurrentKey) -> FamilyOut:
    """One family with its members (the ids a feature's `families` lists)."""
    found = [f for f in feature_repo.families_by_id(session, family_ids=[family_id]) if f.sae_run_id == run.id]
    if not found:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"SAE run {run.id} has no family {family_id}")
    return families_out(session, found)[0]


def families_out(session, fams) -> list[FamilyOut]:  # noqa: ANN001
    members = feature_repo.family_members(session, family_ids=[f.id for f in fams])
    return [
        FamilyOut(id=f.id, iteration=f.iteration, root_index=f.root_index, size=f.size, label=f.label,
                  members=[FamilyMemberOut(index=m.feature_index, parent_index=m.parent_index, depth=m.depth)
                           for m in members[f.id]])
        for f in fams
    ]


@router.post("/{run_id}/encode", response_model=EncodeOut,
             responses={**NOT_FOUND, 409: {"model": ErrorOut}, 413: {"model": ErrorOut}, 422: {"model": ErrorOut}})
async def encode_texts(run_id: int, body: EncodeTextsRequest, request: Request, session: SessionDep,
                       _: CurrentKey) -> EncodeOut:
    """Each text encoded as the run encodes a stored note (as a passage, with its segments where the run has
    segment codes): its strongest features, named, and each segment's. Reads only (a viewer may); audited by
    count, never a text."""
    return await encode_run_texts(request.app.state, session, run_id, body)
