"""/api/v1/embedding-runs: embed a dataset (a job) or import its vectors, list runs with their status and figures."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status

from contracts.catalog import ErrorOut
from contracts.runs import EmbeddingRunCreate, EmbeddingRunOut, EmbeddingRunPage
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.runs import repo
from gateway.domain.runs.embedding import create_embedding_run
from gateway.domain.runs.embedding_import import import_embedding_run, import_request
from gateway.uploads import receive_upload

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


IMPORT_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file", "dataset_id"],
    "properties": {
        "file": {"type": "string", "format": "binary", "description":
                 "Parquet: a `vector` column (list of floats, d each) and one id column, `external_id` (the "
                 "dataset's ids), `doc_id` or `position`, every document once, any order; or .npy: float [N, d], "
                 "row i = the document at position i"},
        "segments": {"type": "string", "format": "binary", "description":
                     "Optional segment vectors (sentences, for SAE runs with train_on segments): Parquet with an id "
                     "column as above, `char_start`, `char_end` (the segment is text[char_start:char_end]) and "
                     "`vector` (d floats); or .npz with arrays of those names (`vectors` [S, d]). Any order, any "
                     "number per document; a document without one gets its whole text and its own vector"},
        "dataset_id": {"type": "integer"},
        "name": {"type": "string",
                 "description": "The model's name, recorded as 'imported:<name>' (default: the file's name)"},
        "dim": {"type": "integer", "description": "If given, the vectors' dimension must equal it"},
        "normalize": {"type": "boolean", "default": True,
                      "description": "Scale each vector to unit L2 norm (as embedded runs are); false: as given"},
        "query_model": {"type": "string", "description": "An embedder model (path, hub id, 'default') that embeds "
                        "texts as these vectors were: enables text search and naming; without it those answer 409"},
        "query_pooling": {"type": "string", "enum": ["mean", "mean_content", "cls"], "default": "mean"}}}}}}}


@router.post("/import", response_model=EmbeddingRunOut, status_code=status.HTTP_201_CREATED, openapi_extra=IMPORT_BODY,
             responses={413: {"model": ErrorOut}, 422: {"model": ErrorOut}, 503: {"model": ErrorOut}})
async def import_embeddings(request: Request, principal: CurrentKey, rid: RequestId) -> EmbeddingRunOut:
    """Import vectors embedded elsewhere for an existing dataset: checked in full (shape, ids, finite values)
    before anything is stored, then stored as a succeeded run that SAEs train on like an embedded one.
    Each problem is a 4xx naming the field and, where there is one, the row."""
    settings = request.app.state.settings
    upload = await receive_upload(request, tmp_dir=settings.uploads_dir, max_bytes=settings.max_upload_bytes,
                                  extra_file_fields=("segments",))
    try:
        body = import_request(upload.fields, path=upload.file_path, filename=upload.filename,
                              segments_path=upload.extra_files.get("segments"),
                              segments_filename=upload.extra_filenames.get("segments"))
        run = await import_embedding_run(request.app.state, body, principal, rid)
    finally:
        upload.cleanup()
    return EmbeddingRunOut.model_validate(run)


@router.get("", response_model=EmbeddingRunPage)
def list_runs(
    session: SessionDep, principal: CurrentKey, dataset_id: Annotated[int | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> EmbeddingRunPage:
    rows, total = repo.list_embedding_runs(session, limit=limit, offset=offset, dataset_id=dataset_id,
                                           project_ids=principal.project_ids)
    return EmbeddingRunPage(items=[EmbeddingRunOut.model_validate(r) for r in rows], total=total)


@router.get("/{run_id}", response_model=EmbeddingRunOut, responses={404: {"model": ErrorOut}})
def get_run(run_id: int, session: SessionDep, _: CurrentKey) -> EmbeddingRunOut:
    run = repo.get_embedding_run(session, run_id=run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"embedding run {run_id} not found")
    return EmbeddingRunOut.model_validate(run)
