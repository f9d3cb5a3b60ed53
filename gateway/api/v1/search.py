"""POST /api/v1/sae-runs/{id}/search: documents by feature expression or by text, features by label."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Body, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import JSONResponse

from contracts.catalog import ErrorOut
from contracts.search import Candidate, DocumentFeatures, SearchErrorOut, SearchRequest, SearchResponse
from gateway.api.v1.sae import SaeRunDep
from gateway.deps import CurrentKey, SessionDep
from gateway.domain.auth import trail
from gateway.search import service
from gateway.search.expressions import ExpressionError, FeatureOutOfRange, UnknownFamilyError, UnknownLabelError
from gateway.search.space import SearchNotReady

router = APIRouter(prefix="/sae-runs", tags=["search"])

EXAMPLES = {
    "expression": {"summary": "Confirmed, not suspected", "value": {
        "mode": "expression", "expression": 'label:"bronchiolitis" AND NOT label:"suspected"', "limit": 20}},
    "weighted": {"summary": "Weighted sum", "value": {"mode": "expression", "expression": "0.7*F12 + 0.3*F40 >= 0.5"}},
    "text": {"summary": "Nearest documents to a text", "value": {"mode": "text", "text": "wheezing infant, fever"}},
    "label": {"summary": "Features by label words", "value": {"mode": "label", "query": "otitis", "method": "fulltext"}},
}


@router.post("/{run_id}/search", response_model=SearchResponse,
             responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": SearchErrorOut}})
async def search(
    run: SaeRunDep, body: Annotated[SearchRequest, Body(openapi_examples=EXAMPLES)], request: Request,
    session: SessionDep, _: CurrentKey,
) -> SearchResponse:
    """`expression`: documents matching a feature expression, best score first, with the referenced
    features' activations; `text`: the documents nearest to a text and the text's own features;
    `label`: features whose shown label matches (full text or semantic). Paged by limit/offset, with
    the total count. A wrong expression is a 422 saying where (line, column, what was expected)."""
    state = request.app.state
    # The request's own session (the key and the run were read in it): one transaction a request.
    if body.mode == "expression":
        return trail.record_search(session, run.id, body.expression, body.mode,
                                   await asyncio.to_thread(service.expression_search, state, run.id, body, session))
    if body.mode == "text":
        return trail.record_search(session, run.id, body.text, body.mode,
                                   await service.text_search(state, run.id, body, session))
    return await service.label_query(state, run.id, body, session)


@router.get("/{run_id}/documents/{document_id}", response_model=DocumentFeatures,
            responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}})
async def document_features(
    run: SaeRunDep, document_id: int, request: Request, session: SessionDep, _: CurrentKey,
    limit: Annotated[int, Query(ge=1, le=512, description="The document's strongest features listed.")] = 32,
    per_segment: Annotated[int, Query(ge=1, le=64, description="Features listed per segment.")] = 8,
    segment_offset: Annotated[int, Query(ge=0, description="Segments to skip.")] = 0,
    segment_limit: Annotated[int, Query(ge=1, le=1000, description="Segments listed.")] = 200,
    mark: Annotated[int | None, Query(ge=0, description="A feature whose activation in the document and in each "
                                      "listed segment is returned (`marked`, `marked_activation`).")] = None,
) -> DocumentFeatures:
    """One document of the run's dataset as the SAE reads it: its text, its strongest features, and each of its
    segments (clauses or sentences, in a run with segment codes) with the features active there, named, each
    saying whether `label:"…"` selects it there; `mark` adds one feature's activation everywhere. A read of the
    document's text: audited."""
    try:
        return await asyncio.to_thread(service.document_features, request.app.state, run.id, document_id,
                                       limit=limit, per_segment=per_segment, segment_offset=segment_offset,
                                       segment_limit=segment_limit, mark=mark, session=session)
    except service.MarkOutOfRange as exc:
        raise HTTPException(422, detail=f"mark: {exc}") from exc
    except service.DocumentNotInRun as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc


def _error(status: int, detail: str, **extra: object) -> JSONResponse:
    return JSONResponse(SearchErrorOut(detail=detail, **extra).model_dump(), status_code=status)


def add_error_handlers(app: FastAPI) -> None:
    """Each expression error → 422 naming where and what; a run without codes → 409."""

    @app.exception_handler(ExpressionError)
    async def expression_error(_: Request, exc: ExpressionError) -> JSONResponse:
        return _error(422, str(exc), field="expression", locator=f"line {exc.line}, column {exc.column}",
                      line=exc.line, column=exc.column, expected=exc.expected,
                      candidates=[Candidate(index=i, label=lab) for i, lab in getattr(exc, "candidates", [])])

    @app.exception_handler(FeatureOutOfRange)
    async def out_of_range(_: Request, exc: FeatureOutOfRange) -> JSONResponse:
        return _error(422, exc.message, field="expression", locator=f"line {exc.line}, column {exc.column}",
                      line=exc.line, column=exc.column, index=exc.index, n_features=exc.n_features)

    @app.exception_handler(UnknownLabelError)
    async def unknown_label(_: Request, exc: UnknownLabelError) -> JSONResponse:
        return _error(422, exc.message, field="expression", locator=f"line {exc.line}, column {exc.column}",
                      line=exc.line, column=exc.column,
                      candidates=[Candidate(index=i, label=lab) for i, lab in exc.candidates])

    @app.exception_handler(UnknownFamilyError)
    async def unknown_family(_: Request, exc: UnknownFamilyError) -> JSONResponse:
        return _error(422, exc.message, field="expression", locator=f"line {exc.line}, column {exc.column}",
                      line=exc.line, column=exc.column)

    @app.exception_handler(SearchNotReady)
    async def not_ready(_: Request, exc: SearchNotReady) -> JSONResponse:
        return _error(409, str(exc), field="run_id")
