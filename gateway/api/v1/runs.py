"""/api/v1/embedding-runs: embed a dataset (a job), list runs with their status and figures."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status

from contracts.catalog import ErrorOut
from contracts.runs import EmbeddingRunCreate, EmbeddingRunOut, EmbeddingRunPage
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.runs import repo
from gateway.domain.runs.embedding import create_embedding_run

router = APIRouter(prefix="/embedding-runs", tags=["embedding runs"])


@router.post("", response_model=EmbeddingRunOut, status_code=status.HTTP_202_ACCEPTED,
             responses={200: {"model": EmbeddingRunOut}, 422: {"model": ErrorOut}, 503: {"model": ErrorOut}})
async def new_embedding_run(
    body: EmbeddingRunCreate, request: Request, response: Response, principal: CurrentKey, rid: RequestId
) -> EmbeddingRunOut:
    """Start embedding a dataset (202), or return the run that already does the same work (200)."""
    run, created = await create_embedding_run(request.app.state, body, principal, rid)
    if not created:
        response.status_code = status.HTTP_200_OK
    return EmbeddingRunOut.model_validate(run)


@router.get("", response_model=EmbeddingRunPage)
def list_runs(
    session: SessionDep, _: CurrentKey, dataset_id: Annotated[int | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> EmbeddingRunPage:
    rows, total = repo.list_embedding_runs(session, limit=limit, offset=offset, dataset_id=dataset_id)
    return EmbeddingRunPage(items=[EmbeddingRunOut.model_validate(r) for r in rows], total=total)


@router.get("/{run_id}", response_model=EmbeddingRunOut, responses={404: {"model": ErrorOut}})
def get_run(run_id: int, session: SessionDep, _: CurrentKey) -> EmbeddingRunOut:
    run = repo.get_embedding_run(session, run_id=run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"embedding run {run_id} not found")
    return EmbeddingRunOut.model_validate(run)
