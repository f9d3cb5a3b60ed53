"""The three searches of an SAE run: by feature expression, by text, by label. No FastAPI here:
the route passes the app's state (`factory`, `store`, `services`, `settings`) and a body.

Blocking work (the database, FAISS, NumPy) runs in worker threads; calls to the embedder and
the SAE service are awaited over HTTP (in-process ASGI in embedded mode).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from contracts.search import (
    DocumentFeatures,
    ExpressionResult,
    ExpressionSearch,
    FeatureHit,
    LabelHit,
    LabelResult,
    LabelSearch,
    ReadFeature,
    SegmentFeatures,
    SegmentHit,
    TextResult,
    TextSearch,
)
from gateway.db import session_scope
from gateway.domain.auth import trail
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.query_model import query_embedding
from gateway.search import labels as label_search
from gateway.search import segment_rank, text_index
from gateway.search.document_view import read_document
from gateway.search.expressions import evaluate
from gateway.search.results import (activations_at, document_hits, feature_labels, matched_segments,
                                    page_by_score)
from gateway.search.label_rank import LabelEntry, rank_labels, selected
from gateway.search.space import codes_or_none, load_search_space


@contextmanager
def _unit(state: Any, session: Session | None) -> Iterator[Session]:
    """The caller's session (the API request's own: its run is already loaded, and one
    transaction serves the whole request), else a unit of work of our own."""
    if session is not None:
        yield session
        return
    with session_scope(state.factory) as own:
        yield own


def _run_and_dataset(session: Any, run_id: int) -> tuple[Any, Any]:
    run = run_repo.get_sae_run(session, run_id=run_id)
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    return run, emb


def expression_search(state: Any, run_id: int, body: ExpressionSearch, session: Session | None = None) -> ExpressionResult:
    """Blocking. Raises the expression errors (→ 422) and SearchNotReady (→ 409)."""
    with _unit(state, session) as db:
        run, emb = _run_and_dataset(db, run_id)
        space = load_search_space(db, state.store, run)
        start = time.perf_counter()
        match = evaluate(body.expression, space)
        elapsed_ms = (time.perf_counter() - start) * 1000
        positions = np.flatnonzero(match.mask)
        page = page_by_score(positions, match.score[positions], offset=body.offset, limit=body.limit)
        names = feature_labels(db, sae_run_id=run.id, indices=match.features)
        acts = activations_at(space.codes, match.features, page)
        segments, segment_acts = matched_segments(space, match.segment, match.features, page)
        items = document_hits(db, dataset_id=emb.dataset_id, positions=page, scores=match.score[page].tolist(),
                              features=match.features, acts=acts, names=names, segments=segments,
                              segment_acts=segment_acts)
    return ExpressionResult(
        expression=body.expression, total=len(positions), limit=body.limit, offset=body.offset,
        features=[FeatureHit(index=f, label=names[f][0], reliable=names[f][1]) for f in match.features],
        items=items, elapsed_ms=round(elapsed_ms, 3),
    )


@dataclass(frozen=True)
class _TextTarget:
    """What a text search needs of its run, read in one session before the services are called."""

    spec: dict[str, Any]  # the embed request for the run's model
    index_uri: str
    sae_uri: str  # the SAE's folder, for /encode
    sae_run_id: int
    dataset_id: int
    space: Any  # the run's SearchSpace (codes for the activations shown)
    segments_uri: str | None  # the run's segment ranker (segment_rank.py), None without segments


def _text_prepare(state: Any, run_id: int, session: Session | None) -> _TextTarget:
    settings = state.settings
    with _unit(state, session) as db:
        run, emb = _run_and_dataset(db, run_id)
        spec = query_embedding(emb)  # NoQueryModel (409) for imported vectors without a query model
        space = load_search_space(db, state.store, run)  # SearchNotReady before any other work
        artifacts = run.result["artifacts"]
        sae_uri = artifacts["cfg"]["uri"].rsplit("/", 1)[0]
        emb_id, dataset_id = emb.id, emb.dataset_id
    if "text_index" in artifacts:  # an extended run's own, over its embedding run's notes and the appended ones
        uri, segments_uri = artifacts["text_index"]["uri"], (artifacts.get("segment_ranker") or {}).get("uri")
    else:
        uri = text_index.ensure_index(state.factory, state.store, emb_id, flat_max_docs=settings.search_flat_max_docs,
                                      large=settings.search_large_index)
        segments_uri = text_index.ensure_segment_ranker(state.factory, state.store, emb_id,
                                                        max_distinct=settings.search_segments_max)
    return _TextTarget(spec=spec, index_uri=uri, sae_uri=sae_uri, sae_run_id=run_id, dataset_id=dataset_id,
                       space=space, segments_uri=segments_uri)


def _nearest(state: Any, target: _TextTarget, vector: np.ndarray, k: int) -> tuple[text_index.Neighbours, list, str]:
    """(the k best documents, the segment each was ranked by or None, the index kind): by the documents' vectors and
    their best segments' where the run has a segment ranker, else by the FAISS index of the documents."""
    if target.segments_uri is not None:
        ranker = text_index.load_segment_ranker(state.store, target.segments_uri)
        ranked = segment_rank.rank(ranker, vector, k)
        hits = [SegmentHit(index=r, start=int(ranker.char_start[r]), end=int(ranker.char_end[r]))
                for r in ranked.segments.tolist()]
        return text_index.Neighbours(ranked.positions, ranked.scores), hits, "exact"
    index = text_index.load_index(state.store, target.index_uri)
    kind = text_index.choose_kind(index.ntotal, flat_max_docs=state.settings.search_flat_max_docs,
                                  large=state.settings.search_large_index)
    hits = text_index.search(index, vector, k)
    return hits, [None] * len(hits.positions), kind


def _text_finish(state: Any, target: _TextTarget, body: TextSearch, hits: text_index.Neighbours, segments: list,
                 query_features: list[tuple[int, float]], session: Session | None) -> tuple[list, list[FeatureHit]]:
    top = query_features[: body.top_features]
    page = hits.positions[body.offset:body.offset + body.limit]
    indices = [i for i, _ in top]
    acts = activations_at(target.space.codes, indices, page)
    with _unit(state, session) as db:
        names = feature_labels(db, sae_run_id=target.sae_run_id, indices=indices)
        items = document_hits(db, dataset_id=target.dataset_id, positions=page,
                              scores=hits.scores[body.offset:body.offset + body.limit].tolist(),
                              features=indices, acts=acts, names=names,
                              segments=segments[body.offset:body.offset + body.limit])
    return items, [FeatureHit(index=i, activation=a, label=names[i][0], reliable=names[i][1]) for i, a in top]


async def text_search(state: Any, run_id: int, body: TextSearch, session: Session | None = None) -> TextResult:
    """The documents nearest to `body.text` and the text's own features, named."""
    target = await asyncio.to_thread(_text_prepare, state, run_id, session)
    embedded = await state.services.post("embedder", "/embed", {"texts": [body.text], **target.spec})
    vector = np.asarray(embedded["vectors"][0], dtype=np.float32)
    (hits, segments, kind), encoded = await asyncio.gather(
        asyncio.to_thread(_nearest, state, target, vector, body.offset + body.limit),
        state.services.post("sae", "/encode", {"vectors": [vector.tolist()], "sae_uri": target.sae_uri}),
    )
    query_features = [(int(f["index"]), float(f["activation"])) for f in encoded["features"][0]]
    items, named = await asyncio.to_thread(_text_finish, state, target, body, hits, segments, query_features, session)
    return TextResult(text=body.text, total=int(target.space.codes.shape[0]), limit=body.limit, offset=body.offset,
                      index=kind, ranked_by="documents and segments" if target.segments_uri else "documents",
                      query_features=named, items=items)


MAX_LABEL_MATCHES = 2000
"""Full-text matches ranked by how well their names hold (label_rank.py) before a page is cut."""


def _fulltext(state: Any, run_id: int, body: LabelSearch, session: Session | None) -> tuple[list, int, dict]:
    """The page of features whose label matches, ranked by how well the name holds (not by text rank), and the
    notes each name selects."""
    with _unit(state, session) as db:
        every = body.model_copy(update={"limit": MAX_LABEL_MATCHES, "offset": 0})
        rows, total = label_search.fulltext(db, run_id, every)
        codes = codes_or_none(db, state.store, run_repo.get_sae_run(db, run_id=run_id))
    entries = {f.index: (f, i, score) for f, i, score in rows}
    ranked = rank_labels([LabelEntry(f.index, i.label, i.description, i.score, i.reliable, i.threshold, f.density)
                          for f, i, _ in rows], codes, body.query)
    page = ranked[body.offset:body.offset + body.limit]
    return [entries[e.index] for e, _ in page], total, {e.index: n for e, n in page}


async def label_query(state: Any, run_id: int, body: LabelSearch, session: Session | None = None) -> LabelResult:
    """Features by label: full text in the database (ranked by how well each name holds), or semantic (cosine
    with label embeddings)."""
    notes: dict[int, int | None] = {}
    if body.method == "fulltext":
        rows, total, notes = await asyncio.to_thread(_fulltext, state, run_id, body, session)
    else:
        rows, total = await label_search.semantic(state, run_id, body)
    items = [LabelHit(index=f.index, label=i.label, description=i.description, score=round(score, 6),
                      interpretation_score=i.score, reliable=i.reliable, density=f.density, threshold=i.threshold,
                      notes=notes.get(f.index)) for f, i, score in rows]
    return LabelResult(query=body.query, method=body.method, total=total, limit=body.limit, offset=body.offset,
                       items=items)


class DocumentNotInRun(LookupError):
    """The document is not one of the SAE run's dataset (→ 404, as for an id that does not exist)."""


class MarkOutOfRange(ValueError):
    """The feature to mark is not one of the run's."""


def document_features(state: Any, run_id: int, document_id: int, *, limit: int, per_segment: int,
                      segment_offset: int = 0, segment_limit: int = 200, mark: int | None = None,
                      session: Session | None = None) -> DocumentFeatures:
    """Blocking. One document of the run's dataset with its strongest features and a page of its segments with
    theirs, named, each saying whether label:"…" selects it there; with `mark`, that feature's activation in the
    document and in each listed segment. A read of the document's text, audited in the caller's unit of work.
    Raises MarkOutOfRange, DocumentNotInRun, SearchNotReady."""
    with _unit(state, session) as db:
        run, emb = _run_and_dataset(db, run_id)
        if mark is not None and not 0 <= mark < (run.n_latents or 0):
            raise MarkOutOfRange(f"feature {mark} is out of range: SAE run {run.id} has features "
                                 f"0..{(run.n_latents or 0) - 1}")
        doc = dataset_repo.get_document(db, dataset_id=emb.dataset_id, document_id=document_id)
        if doc is None:
            raise DocumentNotInRun(f"document {document_id} not found in the dataset of SAE run {run_id}")
        space = load_search_space(db, state.store, run)
        reading = read_document(space, doc.position, limit=limit, per_segment=per_segment,
                                segment_offset=segment_offset, segment_limit=segment_limit, mark=mark)
        shown = {f for f, _ in reading.features} | {f for s in reading.segments or [] for f, _ in s.features}
        names = feature_labels(db, sae_run_id=run.id, indices=sorted(shown | ({mark} if mark is not None else set())))

        def hits(active: list[tuple[int, float]]) -> list[ReadFeature]:
            out = []
            for f, a in active:
                label, reliable = names[f]
                threshold = space.thresholds.get(f) if label is not None else None
                out.append(ReadFeature(index=f, activation=a, label=label, reliable=reliable, threshold=threshold,
                                       selected=None if label is None else bool(selected(np.float32(a), threshold))))
            return out

        marked = hits([(mark, reading.marked)])[0] if mark is not None else None
        segments = None if reading.segments is None else [
            SegmentFeatures(index=s.index, start=s.start, end=s.end, n_active=s.n_active, features=hits(s.features),
                            marked_activation=s.marked) for s in reading.segments]
        trail.record_read(db, "document.features", dataset_id=emb.dataset_id, count=1, sae_run_id=run.id,
                          document_id=doc.id)
        return DocumentFeatures(sae_run_id=run.id, document_id=doc.id, position=doc.position,
                                external_id=doc.external_id, text=doc.text, labels=list(doc.labels),
                                n_active=reading.n_active, features=hits(reading.features), marked=marked,
                                n_segments=reading.n_segments, segment_offset=segment_offset, segments=segments)
