"""Importing a dataset: parse the uploaded file in a stream, store it all or nothing.

All documents are inserted in one transaction and the snapshot artifact is put in the store
only once every line has parsed; any error rolls the transaction back and removes what was
written, so a failed upload leaves the database and the store as they were.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from artifacts import ArtifactStore
from contracts.datasets import ColumnMapping
from gateway.db import session_scope
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.auth.accounts import default_project
from gateway.domain.auth.service import Principal, audit
from gateway.domain.datasets import repo
from gateway.domain.datasets.models import Dataset
from gateway.domain.datasets.parsing import DatasetInputError, detect_format, iter_documents
from gateway.domain.datasets.snapshot import SnapshotWriter
from gateway.domain.jobs.service import request_cancel
from gateway.domain.runs import repo as run_repo

log = logging.getLogger(__name__)
BATCH_BYTES = 16 * 1024 * 1024  # flush a batch past this much text, whatever its length


@dataclass(frozen=True)
class ImportRequest:
    path: Path
    filename: str | None
    name: str | None = None
    description: str | None = None
    declared_format: str | None = None
    mapping: ColumnMapping = field(default_factory=ColumnMapping)
    upload_size: int = 0
    project_id: int | None = None
    """The project the dataset belongs to (None: the `default` project)."""


@dataclass(frozen=True)
class ImportLimits:
    max_document_bytes: int
    max_uncompressed_bytes: int
    batch_size: int


def import_dataset(
    factory: sessionmaker[Session],
    store: ArtifactStore,
    req: ImportRequest,
    *,
    limits: ImportLimits,
    principal: Principal | None,
    request_id: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Dataset:
    """Parse `req.path` and store its documents; raises DatasetInputError, storing nothing."""
    fmt = detect_format(req.filename, req.declared_format)
    snapshot_tmp = req.path.with_name(req.path.name + ".snapshot.parquet")
    snapshot_key: str | None = None
    started = time.monotonic()
    try:
        with session_scope(factory) as session:
            ds = repo.add_dataset(
                session,
                name=(req.name or Path(req.filename or "dataset").stem)[:200],
                description=req.description,
                format=fmt,
                source_filename=req.filename,
                size_bytes=req.upload_size,
                column_mapping=req.mapping.model_dump(),
                project_id=req.project_id if req.project_id is not None else default_project(session).id,
                created_by_key_id=principal.key_id if principal else None,
            )
            stats = _load_documents(session, ds, req, fmt, limits, snapshot_tmp, on_progress)
            if stats.n_documents == 0:
                raise DatasetInputError("the file holds no documents")
            snapshot_key = f"datasets/{ds.id}/snapshot.parquet"
            info = store.put_file(snapshot_key, snapshot_tmp, kind="snapshot")
            art = artifact_repo.record(session, info=info, owner_type="dataset", owner_id=ds.id)
            ds.snapshot_artifact_id = art.id
            ds.n_documents, ds.text_bytes = stats.n_documents, stats.text_bytes
            ds.label_counts = dict(stats.labels.most_common())
            audit(session, principal, "dataset.create", target_type="dataset", target_id=ds.id, request_id=request_id,
                  details={"format": fmt, "n_documents": stats.n_documents, "size_bytes": req.upload_size})
    except BaseException:
        if snapshot_key is not None:
            store.delete(snapshot_key)
        raise
    finally:
        snapshot_tmp.unlink(missing_ok=True)
    log.info(
        "dataset imported",
        extra={"dataset_id": ds.id, "n_documents": ds.n_documents, "seconds": round(time.monotonic() - started, 2)},
    )
    return ds


@dataclass
class _ImportStats:
    n_documents: int = 0
    text_bytes: int = 0
    labels: Counter[str] = None  # type: ignore[assignment]


def _load_documents(
    session: Session,
    ds: Dataset,
    req: ImportRequest,
    fmt: str,
    limits: ImportLimits,
    snapshot_path: Path,
    on_progress: Callable[[int, int], None] | None,
) -> _ImportStats:
    stats = _ImportStats(labels=Counter())
    writer = SnapshotWriter(snapshot_path)
    batch: list[dict[str, Any]] = []
    batch_bytes = 0
    try:
        docs = iter_documents(
            req.path,
            fmt,  # type: ignore[arg-type]
            req.mapping,
            max_document_bytes=limits.max_document_bytes,
            max_uncompressed_bytes=limits.max_uncompressed_bytes,
        )
        for doc in docs:
            size = len(doc.text.encode("utf-8"))
            batch.append(
                {
                    "dataset_id": ds.id,
                    "position": stats.n_documents,
                    "external_id": doc.external_id,
                    "text": doc.text,
                    "labels": list(doc.labels),
                    "meta": doc.metadata,
                    "n_chars": len(doc.text),
                }
            )
            stats.n_documents += 1
            stats.text_bytes += size
            stats.labels.update(doc.labels)
            batch_bytes += size
            if len(batch) >= limits.batch_size or batch_bytes >= BATCH_BYTES:
                _flush(session, writer, batch)
                batch, batch_bytes = [], 0
                if on_progress:
                    on_progress(stats.n_documents, req.upload_size)
        if batch:
            _flush(session, writer, batch)
    finally:
        writer.close()
    return stats


def _flush(session: Session, writer: SnapshotWriter, batch: list[dict[str, Any]]) -> None:
    ids = repo.insert_documents(session, rows=batch)
    writer.write_batch(batch, ids)


def delete_dataset(
    factory: sessionmaker[Session], store: ArtifactStore, *, dataset_id: int, principal: Principal | None,
    request_id: str | None = None,
) -> bool:
    """Delete a dataset, its documents and everything computed from it: embedding runs (vectors,
    chunks, FAISS indexes), SAE runs (weights, codes, statistics, naming), concepts (matches), their
    rows (the database cascades) and their files; False if it does not exist."""
    with session_scope(factory) as session:
        ds = repo.get_dataset(session, dataset_id=dataset_id)
        if ds is None:
            return False
        n_docs = ds.n_documents
        derived = run_repo.derived_from_dataset(session, dataset_id=dataset_id)
        for job_id in run_repo.jobs_of_derived(session, derived):  # a running job stops at its next batch
            request_cancel(session, job_id=job_id)
        repo.delete_dataset(session, dataset=ds)
        for owner_type, ids in [("dataset", [dataset_id]), *derived.items()]:
            for owner_id in ids:
                artifact_repo.forget_owner(session, owner_type=owner_type, owner_id=owner_id)
        audit(session, principal, "dataset.delete", target_type="dataset", target_id=dataset_id,
              request_id=request_id, details={"n_documents": n_docs, **{f"{k}s": len(v) for k, v in derived.items()}})
    folders = {"dataset": "datasets", "embedding_run": "embedding-runs", "sae_run": "sae-runs", "concept": "concepts"}
    for owner_type, ids in [("dataset", [dataset_id]), *derived.items()]:
        for owner_id in ids:
            store.delete(f"{folders[owner_type]}/{owner_id}")
    forget_cached_runs(store, derived)
    return True


def forget_cached_runs(store: ArtifactStore, derived: dict[str, list[int]]) -> None:
    """This process's caches of deleted runs (codes, FAISS indexes): ids can be used again."""
    from gateway.search import space, text_index

    if derived["sae_run"]:
        space.clear_cache()
    text_index.forget_runs(store, derived["embedding_run"])


__all__ = ["DatasetInputError", "ImportLimits", "ImportRequest", "delete_dataset", "import_dataset"]
