"""Label search: full text (the database's index) and semantic (the query's embedding against the
embeddings of every shown label, computed once per run and set of labels, then cached)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from contracts.search import LabelSearch
from gateway.db import session_scope
from gateway.domain.features.models import Feature, Interpretation
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.query_model import query_embedding
from gateway.search import repo

Row = tuple[Feature, Interpretation, float]
EMBED_BATCH = 256  # texts per POST /embed: the embedder's default max_texts


def fulltext(session: Session, run_id: int, body: LabelSearch) -> tuple[list[Row], int]:
    """Features whose shown label matches, by the database's full-text index. The rows may outlive
    the session (closing it detaches them): plain attribute reads only."""
    return repo.search_labels(session, sae_run_id=run_id, query=body.query, limit=body.limit, offset=body.offset)


class _LabelVectors:
    """Per SAE run: (labels fingerprint, feature indices, unit label vectors [m, d])."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_run: dict[int, tuple[tuple[int, ...], list[int], np.ndarray]] = {}


_vectors = _LabelVectors()


def _named(factory: Any, run_id: int) -> tuple[tuple[int, ...], list[tuple[Feature, Interpretation]], dict[str, Any]]:
    with session_scope(factory) as session:
        run = run_repo.get_sae_run(session, run_id=run_id)
        emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
        spec = query_embedding(emb) | {"normalize": True}  # NoQueryModel (409) for imported vectors without one
        named = repo.named_features(session, sae_run_id=run_id)
        fingerprint = repo.labels_fingerprint(session, sae_run_id=run_id)
        session.expunge_all()
    return fingerprint, named, spec


async def _embed(state: Any, texts: list[str], spec: dict[str, Any]) -> np.ndarray:
    parts = []
    for start in range(0, len(texts), EMBED_BATCH):
        out = await state.services.post("embedder", "/embed", {"texts": texts[start:start + EMBED_BATCH], **spec})
        parts.append(np.asarray(out["vectors"], dtype=np.float32))
    return np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)


async def semantic(state: Any, run_id: int, body: LabelSearch) -> tuple[list[Row], int]:
    """Named features ranked by the cosine of their label's embedding with the query's (the
    embedding run's own model, as the interpreter's embedding scorer uses)."""
    fingerprint, named, spec = await asyncio.to_thread(_named, state.factory, run_id)
    if not named:
        return [], 0
    cached = _vectors.by_run.get(run_id)
    if cached is None or cached[0] != fingerprint:
        vectors = await _embed(state, [i.label for _, i in named], spec)
        cached = (fingerprint, [f.index for f, _ in named], vectors)
        with _vectors.lock:
            _vectors.by_run[run_id] = cached
    query = (await _embed(state, [body.query], spec))[0]
    cosine = cached[2] @ query  # [m]: both sides unit vectors
    order = np.lexsort((np.arange(len(cosine)), -cosine))[body.offset:body.offset + body.limit]
    return [(named[j][0], named[j][1], float(cosine[j])) for j in order], len(named)
