"""/api/v1/datasets: upload, list, read, page documents, delete."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from contracts.append import AppendOut
from contracts.catalog import DatasetOut, DatasetPage, DocumentOut, DocumentPage, ErrorOut
from contracts.datasets import ColumnMapping
from gateway.deps import CurrentKey, DatasetDep, RequestId, SessionDep, SettingsDep, StoreDep
from gateway.domain.auth import trail
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.accounts import project_for_upload
from gateway.domain.datasets import repo
from gateway.domain.datasets.append import AppendRequest, append_documents
from gateway.domain.datasets.models import Dataset, Document
from gateway.domain.datasets.service import ImportLimits, ImportRequest, delete_dataset, import_dataset
from gateway.uploads import UploadError, receive_upload

router = APIRouter(prefix="/datasets", tags=["datasets"])

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "CSV, JSONL, or a zip of .txt files"},
                        "name": {"type": "string"},
                        "project": {"type": "string", "description": "The project's name or id (default: the "
                                    "caller's only project, else `default`)"},
                        "description": {"type": "string"},
                        "format": {"type": "string", "enum": ["csv", "jsonl", "zip"]},
                        "mapping": {"type": "string", "description": "JSON ColumnMapping, e.g. {\"text\": \"note\"}"},
                        "text_column": {"type": "string"},
                        "id_column": {"type": "string"},
                        "label_columns": {"type": "string", "description": "comma-separated"},
                    },
                }
            }
        },
    }
}
LISTING_TEXT_CHARS = 16_384  # 500 documents a page: at most 8 M characters of text
MAX_MAPPING_BYTES = 8_000  # a ColumnMapping names a few columns: a small object of strings and lists
MAX_MAPPING_DEPTH = 4  # it needs 2 (an object holding lists of names)
ERRORS = {400: {"model": ErrorOut}, 413: {"model": ErrorOut}, 415: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def listed_document(doc: Document, text: str) -> DocumentOut:
    """A listing's document: its text as far as the listing reads it (never `doc.text`: deferred)."""
    return DocumentOut.model_validate({
        "id": doc.id, "position": doc.position, "external_id": doc.external_id, "text": text, "labels": doc.labels,
        "meta": doc.meta, "n_chars": doc.n_chars, "truncated": doc.n_chars > len(text)})


def dataset_out(session: SessionDep, ds: Dataset) -> DatasetOut:
    out = DatasetOut.model_validate(ds)
    if ds.snapshot_artifact_id is not None:
        art = artifact_repo.get(session, artifact_id=ds.snapshot_artifact_id)
        out.snapshot_uri = art.uri if art else None
    return out


def json_depth(text: str) -> int:
    """How deeply JSON text nests arrays and objects, in one pass (brackets inside strings skipped):
    json.loads recurses per level, so text nested thousands deep raised RecursionError (a 500)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def check_mapping_shape(text: str) -> None:
    """The `mapping` field is small and shallow, before it is parsed."""
    if len(text.encode()) > MAX_MAPPING_BYTES:
        raise UploadError(422, f"mapping: longer than the {MAX_MAPPING_BYTES:,}-byte limit", field="mapping")
    if json_depth(text) > MAX_MAPPING_DEPTH:
        raise UploadError(422, f"mapping: nested deeper than the limit of {MAX_MAPPING_DEPTH} levels", field="mapping")


def mapping_from_form(fields: dict[str, str]) -> ColumnMapping:
    """A ColumnMapping from the `mapping` JSON field or the flat *_column fields."""
    raw: dict[str, object] = {}
    if fields.get("mapping"):
        check_mapping_shape(fields["mapping"])
        try:
            raw = json.loads(fields["mapping"])
        except json.JSONDecodeError as exc:
            raise UploadError(422, f"mapping: not valid JSON ({exc.msg} at column {exc.colno})", field="mapping") from None
        if not isinstance(raw, dict):
            raise UploadError(422, "mapping: must be a JSON object", field="mapping")
    for form_name, key in (("text_column", "text"), ("id_column", "id")):
        if fields.get(form_name):
            raw[key] = fields[form_name].strip()
    if fields.get("label_columns"):
        raw["labels"] = [c.strip() for c in fields["label_columns"].split(",") if c.strip()]
    try:
        return ColumnMapping.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "mapping"
        raise UploadError(422, f"mapping.{where}: {first['msg']}", field=f"mapping.{where}") from None


async def receive_and_import(request: Request, settings, store, principal, rid) -> Dataset:  # noqa: ANN001
    upload = await receive_upload(request, tmp_dir=settings.uploads_dir, max_bytes=settings.max_upload_bytes)
    try:
        mapping = mapping_from_form(upload.fields)
        with request.app.state.factory() as session:
            project_id = project_for_upload(session, principal, upload.fields.get("project")).id
            session.commit()  # the `default` project, when an admin's upload made it
        req = ImportRequest(
            project_id=project_id,
            path=upload.file_path, filename=upload.filename, name=upload.fields.get("name") or None,
            description=upload.fields.get("description") or None, declared_format=upload.fields.get("format") or None,
            mapping=mapping, upload_size=upload.size,
        )
        limits = ImportLimits(
            max_document_bytes=settings.max_document_bytes,
            max_uncompressed_bytes=settings.max_upload_bytes,
            batch_size=settings.import_batch_size,
        )
        return await run_in_threadpool(
            import_dataset, request.app.state.factory, store, req, limits=limits, principal=principal, request_id=rid
        )
    finally:
        upload.cleanup()


@router.post("", status_code=status.HTTP_201_CREATED, response_model=DatasetOut, openapi_extra=UPLOAD_BODY, responses=ERRORS)
async def create_dataset(
    request: Request, principal: CurrentKey, settings: SettingsDep, store: StoreDep, rid: RequestId
) -> DatasetOut:
    """Upload a CSV, JSONL or zip of .txt files; all documents are stored, or none (4xx names the line)."""
    ds = await receive_and_import(request, settings, store, principal, rid)
    with request.app.state.factory() as session:
        return dataset_out(session, ds)


@router.post("/{dataset_id}/documents", status_code=status.HTTP_201_CREATED, response_model=AppendOut,
             openapi_extra=UPLOAD_BODY, responses={**ERRORS, 404: {"model": ErrorOut}, 409: {"model": ErrorOut}})
async def append_to_dataset(
    dataset_id: int, request: Request, principal: CurrentKey, settings: SettingsDep, store: StoreDep, rid: RequestId
) -> AppendOut:
    """Add documents after the dataset's (the upload's formats and checks; an id already in the dataset is
    refused): all are stored, or none (4xx names the line). Runs keep their codes until extended."""
    upload = await receive_upload(request, tmp_dir=settings.uploads_dir, max_bytes=settings.max_upload_bytes)
    try:
        req = AppendRequest(dataset_id=dataset_id, path=upload.file_path, filename=upload.filename,
                            declared_format=upload.fields.get("format") or None,
                            mapping=mapping_from_form(upload.fields), upload_size=upload.size)
        limits = ImportLimits(max_document_bytes=settings.max_document_bytes,
                              max_uncompressed_bytes=settings.max_upload_bytes, batch_size=settings.import_batch_size)
        done = await run_in_threadpool(append_documents, request.app.state.factory, store, req, limits=limits,
                                       principal=principal, request_id=rid)
    finally:
        upload.cleanup()
    return AppendOut(dataset_id=done.dataset_id, added=done.added, n_documents=done.n_documents,
                     first_position=done.first_position)


@router.get("", response_model=DatasetPage)
def list_datasets(
    session: SessionDep, principal: CurrentKey,
    limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> DatasetPage:
    """The datasets of the caller's projects (every one for an administrator), newest first."""
    rows, total = repo.list_datasets(session, limit=limit, offset=offset, project_ids=principal.project_ids)
    return DatasetPage(items=[dataset_out(session, d) for d in rows], total=total, limit=limit, offset=offset)


@router.get("/{dataset_id}", response_model=DatasetOut, responses={404: {"model": ErrorOut}})
def get_dataset(ds: DatasetDep, session: SessionDep, _: CurrentKey) -> DatasetOut:
    return dataset_out(session, ds)


@router.get("/{dataset_id}/documents", response_model=DocumentPage, responses={404: {"model": ErrorOut}})
def list_documents(
    ds: DatasetDep, session: SessionDep, _: CurrentKey,
    limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0,
) -> DocumentPage:
    rows, total = repo.list_documents(session, dataset_id=ds.id, limit=limit, offset=offset,
                                      text_chars=LISTING_TEXT_CHARS)
    trail.record_read(session, "documents.read", dataset_id=ds.id, count=len(rows), offset=offset)
    return DocumentPage(items=[listed_document(doc, text) for doc, text in rows], total=total, limit=limit,
                        offset=offset, text_chars=LISTING_TEXT_CHARS)


@router.get("/{dataset_id}/documents/{document_id}", response_model=DocumentOut, responses={404: {"model": ErrorOut}})
def get_document(ds: DatasetDep, document_id: int, session: SessionDep, _: CurrentKey) -> DocumentOut:
    doc = repo.get_document(session, dataset_id=ds.id, document_id=document_id)
    if doc is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"document {document_id} not found in dataset {ds.id}")
    trail.record_read(session, "documents.read", dataset_id=ds.id, count=1, document_id=document_id)
    return DocumentOut.model_validate(doc)


@router.delete("/{dataset_id}", status_code=status.HTTP_204_NO_CONTENT, responses={404: {"model": ErrorOut}})
def remove_dataset(
    dataset_id: int, request: Request, principal: CurrentKey, store: StoreDep, rid: RequestId
) -> Response:
    if not delete_dataset(request.app.state.factory, store, dataset_id=dataset_id, principal=principal, request_id=rid):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"dataset {dataset_id} not found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
