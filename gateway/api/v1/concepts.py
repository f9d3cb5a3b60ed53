"""/api/v1/concepts: saved expressions and sparse probes, their held-out metrics, applying them to
the whole dataset (a job), the matches as a streamed CSV, classifying texts sent now, and deleting them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status
from fastapi.responses import StreamingResponse

from contracts.catalog import ErrorOut
from contracts.classify import ClassifyOut, ClassifyRequest
from contracts.concepts import ConceptCreate, ConceptList, ConceptMetrics, ConceptOut, EvaluateRequest
from contracts.jobs import JobOut
from gateway.db import session_scope
from gateway.deps import CurrentKey, RequestId, SessionDep, StoreDep
from gateway.domain.auth import trail
from gateway.domain.concepts import repo
from gateway.domain.concepts.apply import start_apply
from gateway.domain.concepts.classify import classify_texts
from gateway.domain.concepts.describe import concept_out, concept_summary
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.export import plan_export, stream_csv
from gateway.domain.concepts.service import create_concept, delete_concept, evaluate_concept, get_or_404

router = APIRouter(prefix="/concepts", tags=["concepts"])
ERRORS = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}}


@router.post("", response_model=ConceptOut, status_code=status.HTTP_201_CREATED, responses=ERRORS)
async def new_concept(body: ConceptCreate, request: Request, principal: CurrentKey, rid: RequestId) -> ConceptOut:
    """A saved expression (evaluated on its `examples` when given), or a probe: logistic regression on the run's
    codes (L1 on the codes or L2 on unit-norm rows, and C, by cross-validation), trained on the training split
    of its `examples` and scored on the held-out split. An expression error is a 422 with its line and column."""
    concept_id = await create_concept(request.app.state, body, principal, rid)
    # A fresh session: the request's own began before the concept was committed (SQLite snapshots).
    with session_scope(request.app.state.factory) as session:
        return concept_out(session, get_or_404(session, concept_id))


@router.get("", response_model=ConceptList)
def list_concepts(session: SessionDep, principal: CurrentKey, sae_run_id: Annotated[int | None, Query()] = None,
                  limit: Annotated[int, Query(ge=1, le=500)] = 200,
                  offset: Annotated[int, Query(ge=0)] = 0) -> ConceptList:
    rows, total = repo.list_concepts(session, sae_run_id=sae_run_id, limit=limit, offset=offset,
                                     project_ids=principal.project_ids)
    return ConceptList(items=[concept_summary(c) for c in rows], total=total)


@router.get("/{concept_id}", response_model=ConceptOut, responses=ERRORS)
def get_concept(concept_id: int, session: SessionDep, _: CurrentKey) -> ConceptOut:
    """The concept with its held-out metrics, its probe's named weights, and its last apply job."""
    return concept_out(session, get_or_404(session, concept_id))


@router.delete("/{concept_id}", status_code=status.HTTP_204_NO_CONTENT, responses={404: {"model": ErrorOut}})
def remove_concept(concept_id: int, request: Request, principal: CurrentKey, store: StoreDep,
                   rid: RequestId) -> Response:
    """Delete the concept and its matches; a running apply job of it stops at its next block. The SAE run,
    its features and the documents are kept."""
    if delete_concept(request.app.state.factory, store, concept_id=concept_id, principal=principal,
                      request_id=rid) is None:
        raise ConceptInputError(f"concept {concept_id} not found", field="concept_id", status_code=404)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{concept_id}/evaluate", response_model=ConceptMetrics, responses=ERRORS)
async def evaluate(concept_id: int, request: Request, _: CurrentKey,
                   body: Annotated[EvaluateRequest | None, Body()] = None) -> ConceptMetrics:
    """Held-out metrics again: on the concept's own examples (stored), or on `examples` (an expression
    adopts them; a probe is scored on those it was not trained on, and keeps its own metrics)."""
    metrics = await evaluate_concept(request.app.state, concept_id, body.examples if body else None)
    return ConceptMetrics.model_validate(metrics)


@router.post("/{concept_id}/apply", response_model=JobOut, status_code=status.HTTP_202_ACCEPTED, responses=ERRORS)
async def apply(concept_id: int, request: Request, principal: CurrentKey, rid: RequestId) -> JobOut:
    """Score every document of the dataset (a resumable job: follow it at /api/v1/jobs/{id});
    then GET .../export.csv."""
    return await start_apply(request.app.state, concept_id, principal, rid)


@router.post("/{concept_id}/classify", response_model=ClassifyOut, responses={**ERRORS, 413: {"model": ErrorOut}})
async def classify(concept_id: int, body: ClassifyRequest, request: Request, session: SessionDep,
                   _: CurrentKey) -> ClassifyOut:
    """Each text's decision, score and threshold, and the features that carried it (with the clause each fired
    on), computed as the concept's apply job scores a stored note: a stored note sent as text gets the score
    apply gave it. Reads only (a viewer may); audited by count, never a text."""
    return await classify_texts(request.app.state, session, concept_id, body.texts)


@router.get("/{concept_id}/export.csv", response_class=StreamingResponse, responses={
    200: {"content": {"text/csv": {}}, "description": "document_id, external_id, score, matching_features, "
                                                      "labels, metadata; best score first"}, **ERRORS})
def export(concept_id: int, request: Request, session: SessionDep, _: CurrentKey) -> StreamingResponse:
    """The applied concept's matches as CSV, streamed (memory stays flat for any number of rows)."""
    plan = plan_export(session, concept_id)
    trail.record_export(session, plan)
    state = request.app.state
    headers = {"Content-Disposition": f'attachment; filename="concept-{plan.concept_id}.csv"',
               "X-Matches": str(plan.n_matches)}
    if plan.trained_on:  # the label set the applied probe read: how many labels, and which (a hash)
        headers["X-Training-Labels"] = f"count={plan.trained_on['count']}; sha256={plan.trained_on['hash']}"
    return StreamingResponse(stream_csv(state.factory, state.store, plan), media_type="text/csv; charset=utf-8",
                             headers=headers)
