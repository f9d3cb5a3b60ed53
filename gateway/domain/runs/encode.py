"""Texts encoded by an SAE run as its pipeline encodes a stored note (runs/passages.py): each text's strongest
features, named, and each segment's where the run has segment codes. No FastAPI here; the call is audited as a
read (who, which run, how many texts; never a text)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from contracts.classify import MAX_TEXTS, EncodedFeature, EncodedSegment, EncodedText, EncodeOut, EncodeTextsRequest, ModelOut
from gateway.domain.auth import trail
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.passages import EncodedTexts, PassageTarget, check_texts, encode_texts, passage_target
from gateway.search.results import feature_labels
from gateway.search.space import SearchNotReady

Names = dict[int, tuple[str | None, bool | None]]


def prepare(state: Any, session: Session, run_id: int, texts: list[str]) -> PassageTarget:
    """Blocking. Raises RunInputError: texts.<i> (413/422), sae_run_id (404; 409 without codes or a model here)."""
    check_texts(texts, max_texts=MAX_TEXTS, max_bytes=state.settings.max_document_bytes)
    run = run_repo.get_sae_run(session, run_id=run_id)
    if run is None:
        raise RunInputError(f"SAE run {run_id} not found", field="run_id", status_code=404)
    try:
        return passage_target(session, run)
    except SearchNotReady as exc:
        raise RunInputError(f"sae_run_id: {exc}", field="sae_run_id", status_code=409) from None


def strongest(row: sp.csr_matrix, top: int) -> list[tuple[int, float]]:
    """A one-row CSR's `top` strongest (feature, activation), strongest first (ties: the lower index)."""
    order = np.lexsort((row.indices, -row.data))[:top]
    return [(int(row.indices[j]), float(row.data[j])) for j in order]


def _features(found: list[tuple[int, float]], names: Names) -> list[EncodedFeature]:
    return [EncodedFeature(index=i, activation=a, label=names[i][0], reliable=names[i][1]) for i, a in found]


def _text(encoded: EncodedTexts, i: int, top: int) -> tuple[list, list[tuple[int, int, list]] | None]:
    """Text i's strongest features, and each of its segments' (start, end, strongest)."""
    own = strongest(encoded.codes[i], top)
    if encoded.segments is None:
        return own, None
    doc, spans = encoded.segments.doc, encoded.segments.spans
    rows = range(int(np.searchsorted(doc, i, "left")), int(np.searchsorted(doc, i, "right")))
    return own, [(int(spans[r, 0]), int(spans[r, 1]), strongest(encoded.segment_rows[r], top)) for r in rows]


def finish(target: PassageTarget, encoded: EncodedTexts, session: Session, n_texts: int, top: int) -> EncodeOut:
    """Blocking: the features named, the call audited in the request's unit of work."""
    found = [_text(encoded, i, top) for i in range(n_texts)]
    shown = {f for own, segs in found for f, _ in own} | {f for _, segs in found for *_, s in segs or [] for f, _ in s}
    names = feature_labels(session, sae_run_id=target.sae_run_id, indices=sorted(shown))
    items = [EncodedText(n_active=int(encoded.codes[i].nnz), features=_features(own, names),
                         segments=None if segs is None else [EncodedSegment(start=a, end=b, features=_features(s, names))
                                                             for a, b, s in segs])
             for i, (own, segs) in enumerate(found)]
    trail.record_read(session, "sae_run.encode", dataset_id=target.dataset_id, count=n_texts,
                      sae_run_id=target.sae_run_id)
    model = target.model
    return EncodeOut(sae_run_id=target.sae_run_id, items=items,
                     model=ModelOut(name=model.name, precision=model.precision, engine=model.engine,
                                    file_sha256=model.sha256, provenance=model.provenance))


async def encode_run_texts(state: Any, session: Session, run_id: int, body: EncodeTextsRequest) -> EncodeOut:
    """Each text's codes as the run stores a note's, its strongest features named (and its segments')."""
    target = await asyncio.to_thread(prepare, state, session, run_id, body.texts)
    encoded = await encode_texts(state.services, target, body.texts)
    return await asyncio.to_thread(finish, target, encoded, session, len(body.texts), body.top)
