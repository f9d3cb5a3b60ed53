"""Appending documents to a dataset: parsed and checked as an upload is (the same readers and checks),
external ids unique against the dataset's own as well as within the file, stored all or nothing.

The new documents take the positions after the last one. The dataset's snapshot is immutable, so a new
one (the old rows, then the new) is written under a key of its own and the dataset points to it in the
same transaction as the inserts; runs that read the old snapshot keep reading it. Codes and vectors of
existing runs do not change here: extending a run is a job of its own (gateway/domain/runs/extend.py).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from artifacts import ArtifactStore
from contracts.datasets import ColumnMapping
from gateway.db import session_scope
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.service import Principal, audit
from gateway.domain.datasets import repo
from gateway.domain.datasets.checks import ParsedDocument, shorten
from gateway.domain.datasets.models import Dataset, Document
from gateway.domain.datasets.parsing import DatasetInputError, detect_format, iter_documents
from gateway.domain.datasets.service import BATCH_BYTES, ImportLimits
from gateway.domain.datasets.snapshot import SnapshotWriter
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.models import EmbeddingRun

BUSY = ("queued", "running")


@dataclass(frozen=True)
class AppendRequest:
    dataset_id: int
    path: Path
    filename: str | None
    declared_format: str | None = None
    mapping: ColumnMapping = field(default_factory=ColumnMapping)
    upload_size: int = 0


@dataclass(frozen=True)
class Appended:
    dataset_id: int
    added: int
    n_documents: int
    first_position: int


def append_documents(factory: sessionmaker[Session], store: ArtifactStore, req: AppendRequest, *,
                     limits: ImportLimits, principal: Principal | None, request_id: str | None = None) -> Appended:
    """Parse `req.path` and add its documents after the dataset's; raises DatasetInputError, storing nothing."""
    fmt = detect_format(req.filename, req.declared_format)
    snapshot_tmp = req.path.with_name(req.path.name + ".snapshot.parquet")
    snapshot_key: str | None = None
    try:
        with session_scope(factory) as session:
            ds = _lock_dataset(session, req.dataset_id)
            _refuse_while_embedding(session, ds)
            first = ds.n_documents
            writer = SnapshotWriter(snapshot_tmp)
            try:
                _copy_snapshot(session, store, ds, writer)
                added, text_bytes, labels = _insert_new(session, ds, req, fmt, limits, writer)
            finally:
                writer.close()
            snapshot_key = f"datasets/{ds.id}/snapshot-{first + added}-{uuid.uuid4().hex[:8]}.parquet"
            info = store.put_file(snapshot_key, snapshot_tmp, kind="snapshot")
            ds.snapshot_artifact_id = artifact_repo.record(session, info=info, owner_type="dataset", owner_id=ds.id).id
            ds.n_documents, ds.text_bytes = first + added, ds.text_bytes + text_bytes
            ds.size_bytes += req.upload_size
            ds.label_counts = dict((Counter(ds.label_counts or {}) + labels).most_common())
            audit(session, principal, "dataset.append", target_type="dataset", target_id=ds.id, request_id=request_id,
                  details={"format": fmt, "n_documents": added, "size_bytes": req.upload_size})
            return Appended(dataset_id=ds.id, added=added, n_documents=first + added, first_position=first)
    except BaseException:
        if snapshot_key is not None:
            store.delete(snapshot_key)
        raise
    finally:
        snapshot_tmp.unlink(missing_ok=True)


def _lock_dataset(session: Session, dataset_id: int) -> Dataset:
    """The dataset's row, locked on PostgreSQL: two appends at once take positions one after the other."""
    ds = session.scalar(select(Dataset).where(Dataset.id == dataset_id).with_for_update())
    if ds is None:
        raise DatasetInputError(f"dataset {dataset_id} not found", field="dataset_id")
    return ds


def _refuse_while_embedding(session: Session, ds: Dataset) -> None:
    """An embedding run under way reads the snapshot it started with; a retried one would read the new one."""
    busy = session.scalar(select(EmbeddingRun.id).where(EmbeddingRun.dataset_id == ds.id,
                                                        EmbeddingRun.status.in_(BUSY)).limit(1))
    if busy is not None:
        raise RunInputError(f"dataset_id: embedding run {busy} of dataset {ds.id} is under way; append when it "
                            "has finished", field="dataset_id", status_code=409)


def _copy_snapshot(session: Session, store: ArtifactStore, ds: Dataset, writer: SnapshotWriter) -> None:
    """The current snapshot's rows into the new one, a row group at a time."""
    art = artifact_repo.get(session, artifact_id=ds.snapshot_artifact_id) if ds.snapshot_artifact_id else None
    if art is None:
        return
    with store.open(art.uri) as raw:
        source = pq.ParquetFile(raw)
        for i in range(source.num_row_groups):
            writer.write_table(source.read_row_group(i))


def _insert_new(session: Session, ds: Dataset, req: AppendRequest, fmt: str, limits: ImportLimits,
                writer: SnapshotWriter) -> tuple[int, int, Counter[str]]:
    """Insert the file's documents in batches; returns (documents, UTF-8 bytes, label counts)."""
    docs = iter_documents(req.path, fmt, req.mapping,  # type: ignore[arg-type]
                          max_document_bytes=limits.max_document_bytes,
                          max_uncompressed_bytes=limits.max_uncompressed_bytes)
    id_field = req.mapping.id or "id"
    added, text_bytes, labels = 0, 0, Counter[str]()
    batch: list[tuple[ParsedDocument, dict[str, Any]]] = []
    batch_bytes = 0
    for doc in docs:
        size = len(doc.text.encode("utf-8"))
        batch.append((doc, {"dataset_id": ds.id, "position": ds.n_documents + added, "external_id": doc.external_id,
                            "text": doc.text, "labels": list(doc.labels), "meta": doc.metadata,
                            "n_chars": len(doc.text)}))
        added, text_bytes, batch_bytes = added + 1, text_bytes + size, batch_bytes + size
        labels.update(doc.labels)
        if len(batch) >= limits.batch_size or batch_bytes >= BATCH_BYTES:
            _flush(session, ds.id, batch, id_field, writer)
            batch, batch_bytes = [], 0
    if batch:
        _flush(session, ds.id, batch, id_field, writer)
    return added, text_bytes, labels


def _flush(session: Session, dataset_id: int, batch: list[tuple[ParsedDocument, dict[str, Any]]], id_field: str,
           writer: SnapshotWriter) -> None:
    ids = [doc.external_id for doc, _ in batch if doc.external_id is not None]
    if ids:
        taken = set(session.scalars(select(Document.external_id).where(
            Document.dataset_id == dataset_id, Document.external_id.in_(ids))))
        for doc, _ in batch:
            if doc.external_id in taken:
                raise DatasetInputError(f"{doc.locator}: id '{shorten(doc.external_id or '')}' is already in dataset "
                                        f"{dataset_id}", field=id_field, locator=doc.locator)
    rows = [row for _, row in batch]
    writer.write_batch(rows, repo.insert_documents(session, rows=rows))
