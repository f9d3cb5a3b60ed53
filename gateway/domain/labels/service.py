"""A concept's labels: set, remove and undo one note's label (history kept, audited like a read of patient
text), list them, import and export them. The caller's unit of work commits."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from gateway.db import utcnow
from gateway.domain.auth import trail
from gateway.domain.auth.principal import Principal
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.models import Concept
from gateway.domain.concepts.repo import get_or_404 as concept_or_404
from gateway.domain.datasets.models import Document
from gateway.domain.labels import repo
from gateway.domain.labels.models import CLASSES, ConceptLabel
from gateway.domain.runs import repo as run_repo

IMPORT_COLUMNS = ("external_id", "label")


def dataset_of(session: Session, concept: Concept) -> int:
    run = run_repo.get_sae_run(session, run_id=concept.sae_run_id)
    return run_repo.get_embedding_run(session, run_id=run.embedding_run_id).dataset_id


def document_in(session: Session, concept: Concept, document_id: int, field: str = "document_id") -> Document:
    """The note, which must be one of the concept's dataset (a 404 naming it otherwise)."""
    doc = session.get(Document, document_id)
    dataset_id = dataset_of(session, concept)
    if doc is None or doc.dataset_id != dataset_id:
        raise ConceptInputError(f"{field}: document {document_id} is not in dataset {dataset_id}, the dataset of "
                                f"concept {concept.id}", field=field, status_code=404)
    return doc


def audit_labels(session: Session, action: str, concept: Concept, dataset_id: int, **details: Any) -> None:
    trail.record_read(session, action, dataset_id=dataset_id, count=details.pop("count", 1), concept_id=concept.id,
                      **details)


def _lease_reason(session: Session, concept: Concept, document_id: int, lease_id: int | None) -> str | None:
    """The reason the note was handed out for (its lease, answered now); a given lease must be live and this note's."""
    if lease_id is not None:
        lease = repo.get_lease(session, lease_id=lease_id)
        if lease is None or lease.concept_id != concept.id or lease.document_id != document_id:
            raise ConceptInputError(f"lease_id: lease {lease_id} is not a lease of document {document_id} for concept "
                                    f"{concept.id}", field="lease_id", status_code=409)
        if lease.expires_at <= utcnow() and not lease.released:
            raise ConceptInputError(f"lease_id: lease {lease_id} expired at {lease.expires_at.isoformat()}Z; ask the "
                                    "queue again", field="lease_id", status_code=409)
    return repo.release_lease(session, concept_id=concept.id, document_id=document_id)


def set_label(session: Session, principal: Principal, concept_id: int, document_id: int, label: str, *,
              lease_id: int | None = None, source: str = "api") -> ConceptLabel:
    """Set (or change) the note's label; the last write wins and every write is in the history and the audit."""
    concept = concept_or_404(session, concept_id)
    doc = document_in(session, concept, document_id)
    reason = _lease_reason(session, concept, document_id, lease_id)
    source = "queue" if reason is not None and source == "api" else source
    row = repo.get_label(session, concept_id=concept_id, document_id=document_id)
    previous = row.label if row is not None else None
    if row is None:
        row = ConceptLabel(concept_id=concept_id, document_id=document_id, position=doc.position, label=label,
                           source=source, reason=reason, set_by=principal.name, set_at=utcnow())
        session.add(row)
    else:
        row.label, row.source, row.set_by, row.set_at = label, source, principal.name, utcnow()
        row.reason = reason if reason is not None else row.reason
    repo.add_event(session, concept_id=concept_id, document_id=document_id, label=label, previous=previous,
                   action="set", source=source, reason=row.reason, set_by=principal.name, set_at=utcnow())
    audit_labels(session, "label.set", concept, doc.dataset_id, document_id=document_id, label=label)
    session.flush()
    return row


def delete_label(session: Session, principal: Principal, concept_id: int, document_id: int) -> None:
    concept = concept_or_404(session, concept_id)
    doc = document_in(session, concept, document_id)
    row = repo.get_label(session, concept_id=concept_id, document_id=document_id)
    if row is None:
        raise ConceptInputError(f"document_id: document {document_id} has no label for concept {concept_id}",
                                field="document_id", status_code=404)
    repo.add_event(session, concept_id=concept_id, document_id=document_id, label=None, previous=row.label,
                   action="delete", source="api", reason=row.reason, set_by=principal.name, set_at=utcnow())
    session.delete(row)
    audit_labels(session, "label.delete", concept, doc.dataset_id, document_id=document_id)


def undo_label(session: Session, principal: Principal, concept_id: int, document_id: int) -> ConceptLabel | None:
    """Restore the label the note had before its last change (none: the label goes); returns the restored row."""
    concept = concept_or_404(session, concept_id)
    doc = document_in(session, concept, document_id)
    events = repo.history(session, concept_id=concept_id, document_id=document_id)
    row = repo.get_label(session, concept_id=concept_id, document_id=document_id)
    if not events or (row.label if row else None) != events[-1].label:
        raise ConceptInputError(f"document_id: document {document_id} has no change to undo for concept {concept_id}",
                                field="document_id", status_code=409)
    last = events[-1]
    restored = last.previous
    if restored is None and row is not None:
        session.delete(row)
        row = None
    elif restored is not None and row is None:
        row = ConceptLabel(concept_id=concept_id, document_id=document_id, position=doc.position, label=restored,
                           source=last.source, reason=last.reason, set_by=principal.name, set_at=utcnow())
        session.add(row)
    elif row is not None:
        row.label, row.set_by, row.set_at = restored, principal.name, utcnow()
    repo.add_event(session, concept_id=concept_id, document_id=document_id, label=restored, previous=last.label,
                   action="undo", source=last.source, reason=last.reason, set_by=principal.name, set_at=utcnow())
    audit_labels(session, "label.undo", concept, doc.dataset_id, document_id=document_id, label=restored)
    session.flush()
    return row


def labels_hash(pairs: list[tuple[int, str]]) -> str:
    """SHA-256 of the sorted (document_id, label) pairs: names exactly the labels a probe was trained on."""
    text = "\n".join(f"{d}\t{label}" for d, label in sorted(pairs))
    return hashlib.sha256(text.encode()).hexdigest()


def _parse_import(body: bytes, fmt: str) -> Iterator[tuple[int, str, str]]:
    """(line, external_id, label) of each row; a ConceptInputError names the line."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConceptInputError(f"body: not UTF-8 (byte {exc.start})", field="body") from None
    if fmt == "jsonl":
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConceptInputError(f"line {line_no}: not JSON ({exc.msg})", field=f"line {line_no}") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(c), str) for c in IMPORT_COLUMNS):
                raise ConceptInputError(f"line {line_no}: needs string fields external_id and label",
                                        field=f"line {line_no}")
            yield line_no, row["external_id"], row["label"]
        return
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in IMPORT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ConceptInputError(f"line 1: the header has no column {', '.join(missing)} (it has "
                                f"{', '.join(reader.fieldnames or []) or 'none'})", field="line 1")
    for row in reader:
        yield reader.line_num, (row["external_id"] or ""), (row["label"] or "")


def import_labels(session: Session, principal: Principal, concept_id: int, body: bytes, fmt: str,
                  max_rows: int) -> dict[str, int]:
    """Every row checked before any is written (an unknown note or class names its line; nothing is stored)."""
    concept = concept_or_404(session, concept_id)
    dataset_id = dataset_of(session, concept)
    rows: dict[str, tuple[int, str]] = {}
    for line_no, external_id, label in _parse_import(body, fmt):
        if len(rows) >= max_rows:
            raise ConceptInputError(f"line {line_no}: more than {max_rows} rows", field=f"line {line_no}", status_code=413)
        if label not in CLASSES:
            raise ConceptInputError(f"line {line_no}: label {label[:40]!r} is not one of {', '.join(CLASSES)}",
                                    field=f"line {line_no}")
        if external_id in rows:
            raise ConceptInputError(f"line {line_no}: external_id {external_id[:80]!r} already on line "
                                    f"{rows[external_id][0]}", field=f"line {line_no}")
        rows[external_id] = (line_no, label)
    found = _documents_by_external_id(session, dataset_id, list(rows))
    for external_id, (line_no, _) in rows.items():
        if external_id not in found:
            raise ConceptInputError(f"line {line_no}: no document of dataset {dataset_id} has external_id "
                                    f"{external_id[:80]!r}", field=f"line {line_no}")
    imported = unchanged = 0
    for external_id, (_, label) in rows.items():
        document_id, _ = found[external_id]
        current = repo.get_label(session, concept_id=concept_id, document_id=document_id)
        if current is not None and current.label == label:
            unchanged += 1
            continue
        set_label(session, principal, concept_id, document_id, label, source="import")
        imported += 1
    return {"imported": imported, "unchanged": unchanged}


def _documents_by_external_id(session: Session, dataset_id: int, external_ids: list[str]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for start in range(0, len(external_ids), 1000):
        stmt = select(Document.external_id, Document.id, Document.position).where(
            Document.dataset_id == dataset_id, Document.external_id.in_(external_ids[start:start + 1000]))
        out.update({ext: (doc_id, pos) for ext, doc_id, pos in session.execute(stmt)})
    return out


def record_examples(session: Session, principal: Principal, concept: Concept, rows: list[tuple[int, int, str]]) -> None:
    """A concept made from a label column or document ids: its examples become its label set (source `examples`),
    (document_id, position, label) rows written in one statement."""
    if not rows:
        return
    now = utcnow()
    session.execute(insert(ConceptLabel), [
        {"concept_id": concept.id, "document_id": d, "position": p, "label": label, "source": "examples",
         "reason": None, "set_by": principal.name, "set_at": now} for d, p, label in rows])
