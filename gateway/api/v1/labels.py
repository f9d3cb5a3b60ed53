"""/api/v1/concepts/{id}/labels, /queue, /retrain: a concept's label set, filled note by note from the queue;
the probe retrains on it (in the background after every batch of labels, or when asked)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from typing import Annotated, Literal

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response, status
from fastapi.responses import StreamingResponse

from contracts.catalog import ErrorOut
from contracts.labels import (
    MAX_IMPORT_ROWS,
    ImportResult,
    LabelDetail,
    LabelEventOut,
    LabellingOut,
    LabelList,
    LabelOut,
    LabelPut,
    QueueBatch,
    QueueRequest,
)
from gateway.db import session_scope
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.concepts.describe import labelling_out
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.labels import repo, service
from gateway.domain.labels.queue import next_batch
from gateway.domain.labels.training import retrain, retrain_due, retrain_when_due

router = APIRouter(prefix="/concepts/{concept_id}", tags=["labels"])
ERRORS = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}}
MAX_IMPORT_BYTES = 20 * 1024 * 1024


def label_out(row, external_id: str | None = None) -> LabelOut:
    return LabelOut(document_id=row.document_id, external_id=external_id, position=row.position, label=row.label,
                    source=row.source, reason=row.reason, set_by=row.set_by, set_at=row.set_at)


@router.get("/labels", response_model=LabelList, responses=ERRORS)
def list_labels(concept_id: int, session: SessionDep, _: CurrentKey,
                label: Annotated[Literal["positive", "negative", "skip"] | None, Query()] = None,
                limit: Annotated[int, Query(ge=1, le=500)] = 100,
                offset: Annotated[int, Query(ge=0)] = 0) -> LabelList:
    """The concept's labels, most recent first, with the counts by class."""
    service.concept_or_404(session, concept_id)
    rows, total = repo.list_labels(session, concept_id=concept_id, limit=limit, offset=offset, label=label)
    return LabelList(items=[label_out(r, ext) for r, ext in rows], total=total,
                     counts=repo.label_counts(session, concept_id=concept_id))


@router.get("/labels/export", responses={200: {"content": {"text/csv": {}, "application/x-ndjson": {}}}, **ERRORS})
def export_labels(concept_id: int, request: Request, session: SessionDep, _: CurrentKey,
                  format: Annotated[Literal["csv", "jsonl"], Query()] = "csv") -> StreamingResponse:
    """Every label: the note's external id, its document id, the label, where it came from, who set it and when."""
    concept = service.concept_or_404(session, concept_id)
    counts = repo.label_counts(session, concept_id=concept_id)
    service.audit_labels(session, "label.export", concept, service.dataset_of(session, concept),
                         count=counts["positive"] + counts["negative"] + counts["skip"])
    factory = request.app.state.factory
    columns = ("external_id", "document_id", "label", "source", "set_by", "set_at")

    def lines():
        if format == "csv":
            buf = io.StringIO()
            csv.writer(buf).writerow(columns)
            yield buf.getvalue()
        with session_scope(factory) as own:
            for row in repo.export_rows(own, concept_id=concept_id):
                values = [*row[:5], row[5].isoformat() + "Z"]
                if format == "jsonl":
                    yield json.dumps(dict(zip(columns, values)), ensure_ascii=False) + "\n"
                else:
                    buf = io.StringIO()
                    csv.writer(buf).writerow(values)
                    yield buf.getvalue()

    media = "text/csv; charset=utf-8" if format == "csv" else "application/x-ndjson"
    return StreamingResponse(lines(), media_type=media, headers={
        "Content-Disposition": f'attachment; filename="concept-{concept_id}-labels.{format}"'})


@router.post("/labels/import", response_model=ImportResult, responses={413: {"model": ErrorOut}, **ERRORS})
async def import_labels(concept_id: int, request: Request, session: SessionDep, principal: CurrentKey,
                        format: Annotated[Literal["csv", "jsonl"], Query()] = "csv") -> ImportResult:
    """Labels by external id, CSV (columns external_id, label) or JSON lines; every row is checked before any is
    written: an unknown note, class or a repeated id is a 422 naming its line, and nothing is stored."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_IMPORT_BYTES:
            raise ConceptInputError(f"body: larger than {MAX_IMPORT_BYTES} bytes", field="body", status_code=413)
    result = service.import_labels(session, principal, concept_id, bytes(body), format, MAX_IMPORT_ROWS)
    return ImportResult(**result)


@router.get("/labels/{document_id}", response_model=LabelDetail, responses=ERRORS)
def get_label(concept_id: int, document_id: int, session: SessionDep, _: CurrentKey) -> LabelDetail:
    """The note's current label and every change to it."""
    concept = service.concept_or_404(session, concept_id)
    doc = service.document_in(session, concept, document_id)
    row = repo.get_label(session, concept_id=concept_id, document_id=document_id)
    if row is None:
        raise ConceptInputError(f"document_id: document {document_id} has no label for concept {concept_id}",
                                field="document_id", status_code=404)
    events = [LabelEventOut(label=e.label, previous=e.previous, action=e.action, set_by=e.set_by, set_at=e.set_at)
              for e in repo.history(session, concept_id=concept_id, document_id=document_id)]
    return LabelDetail(**label_out(row, doc.external_id).model_dump(), history=events)


@router.put("/labels/{document_id}", response_model=LabelOut, responses=ERRORS)
def put_label(concept_id: int, document_id: int, body: LabelPut, request: Request, session: SessionDep,
              principal: CurrentKey, background: BackgroundTasks) -> LabelOut:
    """Set the note's label (positive, negative, skip: read, never trained on). With the queue's `lease_id`, the
    lease is answered (an expired or foreign one is a 409). Two labellers on one note: the last write wins."""
    row = service.set_label(session, principal, concept_id, document_id, body.label, lease_id=body.lease_id)
    concept = service.concept_or_404(session, concept_id)
    if retrain_due(concept, repo.label_counts(session, concept_id=concept_id)):  # after the response is sent
        background.add_task(asyncio.to_thread, retrain_when_due, request.app.state, concept_id)
    return label_out(row)


@router.delete("/labels/{document_id}", status_code=status.HTTP_204_NO_CONTENT, responses=ERRORS)
def delete_label(concept_id: int, document_id: int, session: SessionDep, principal: CurrentKey) -> Response:
    service.delete_label(session, principal, concept_id, document_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/labels/{document_id}/undo", response_model=LabelOut | None, responses=ERRORS)
def undo_label(concept_id: int, document_id: int, session: SessionDep, principal: CurrentKey) -> LabelOut | None:
    """Restore the label the note had before its last change (null: it had none, the label is removed)."""
    row = service.undo_label(session, principal, concept_id, document_id)
    return label_out(row) if row is not None else None


@router.post("/queue", response_model=QueueBatch, responses=ERRORS)
async def queue(concept_id: int, request: Request, principal: CurrentKey, rid: RequestId,
                body: QueueRequest | None = None) -> QueueBatch:
    """The next notes to label, each leased to the caller for a few minutes: the seed's hits and near misses until
    both classes have labels, then the probe's most uncertain notes spread over the features; a share drawn at
    random in every batch (they alone estimate F1 without bias). Labelled notes never come back."""
    body = body or QueueRequest()
    return await next_batch(request.app.state, concept_id, body.n, principal, body.seed, rid)


@router.post("/retrain", response_model=LabellingOut, responses=ERRORS)
async def retrain_now(concept_id: int, request: Request, _: CurrentKey) -> LabellingOut:
    """Retrain the probe on the labels now: the estimate of F1, the learning curve, the features that carry it."""
    await asyncio.to_thread(retrain, request.app.state, concept_id)
    with session_scope(request.app.state.factory) as session:
        return labelling_out(session, service.concept_or_404(session, concept_id))
