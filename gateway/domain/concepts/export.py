"""The matches of an applied concept as CSV, streamed: the rows are produced batch by batch from the
matches artifact and the documents table, so memory stays flat however many documents match.

Columns: document_id, external_id, score, matching_features (`F12 label; F40 label`), labels
(joined by `|`, as imported), metadata (JSON). Best score first. Never the document text.
A text cell that a spreadsheet would run as a formula is written with a leading `'` (`safe_cell`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from artifacts import ArtifactStore
from gateway.db import session_scope
from gateway.domain.concepts import repo
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.service import get_or_404
from gateway.domain.features import repo as feature_repo
from gateway.domain.runs import repo as run_repo

COLUMNS = ("document_id", "external_id", "score", "matching_features", "labels", "metadata")
BATCH = 1000
# OWASP's CSV injection rule: a cell starting with one of these is a formula to Excel/LibreOffice/Sheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(text: str) -> str:
    """`text` as a spreadsheet shows it, never runs it: a leading `'` before a formula's first character."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class ExportPlan(NamedTuple):
    concept_id: int
    name: str
    dataset_id: int
    matches_uri: str
    n_matches: int
    trained_on: dict[str, Any] | None = None  # the labels (count, hash) the applied probe was trained on


def plan_export(session: Session, concept_id: int) -> ExportPlan:
    """Checked before the first byte is sent: a 404 or a 409 must not arrive as a half CSV."""
    concept = get_or_404(session, concept_id)
    applied = concept.applied or {}
    if not applied.get("uri"):
        raise ConceptInputError(f"concept {concept_id} has not been applied yet: POST /api/v1/concepts/{concept_id}"
                                "/apply, then export", field="concept_id", status_code=409)
    run = run_repo.get_sae_run(session, run_id=concept.sae_run_id)
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    return ExportPlan(concept.id, concept.name, emb.dataset_id, applied["uri"], applied["n_matches"],
                      applied.get("trained_on"))


def feature_names(session: Session, sae_run_id: int, indices: list[int]) -> dict[int, str]:
    """`F12 label` (an unreliable label marked so), or `F12` for an unnamed feature."""
    found = feature_repo.labels_by_index(session, sae_run_id=sae_run_id, indices=indices)
    names = {}
    for index in indices:
        label, reliable = found.get(index, (None, None))
        names[index] = f"F{index}" + (f" {label}" + ("" if reliable is not False else " (unreliable)") if label is not None else "")
    return names


def _rows(batch_docs: dict[int, tuple[Any, ...]], positions: np.ndarray, scores: np.ndarray,
          features: np.ndarray, names: dict[int, str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    for pos, score, feats in zip(positions.tolist(), scores.tolist(), features.tolist()):
        doc = batch_docs.get(pos)
        if doc is None:  # a document deleted since the apply: nothing to export
            continue
        doc_id, external_id, labels, meta = doc
        matching = "; ".join(names.get(f, f"F{f}") for f in feats if f >= 0)
        writer.writerow([doc_id, safe_cell(external_id or ""), f"{score:.6g}", safe_cell(matching),
                         safe_cell("|".join(labels or [])), json.dumps(meta or {}, ensure_ascii=False, sort_keys=True)])
    return out.getvalue()


def stream_csv(factory: sessionmaker[Session], store: ArtifactStore, plan: ExportPlan, *,
               batch: int = BATCH) -> Iterator[bytes]:
    """The CSV, UTF-8, one chunk per batch of matches; each batch reads its documents in one query."""
    matches = np.load(io.BytesIO(store.read_bytes(plan.matches_uri)))
    positions, scores, features = matches["positions"], matches["scores"], matches["features"]
    with session_scope(factory) as session:
        run_id = get_or_404(session, plan.concept_id).sae_run_id
        names = feature_names(session, run_id, sorted({int(f) for f in np.unique(features) if f >= 0}))
    head = io.StringIO()
    csv.writer(head).writerow(COLUMNS)
    yield head.getvalue().encode()
    for start in range(0, len(positions), batch):
        pos = positions[start : start + batch]
        with session_scope(factory) as session:
            docs = repo.documents_at(session, dataset_id=plan.dataset_id, positions=pos.tolist())
        yield _rows(docs, pos, scores[start : start + batch], features[start : start + batch], names).encode()
