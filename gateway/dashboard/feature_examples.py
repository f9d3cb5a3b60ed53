"""The feature page's documents (an HTMX fragment loaded after the page): activating documents
across activation quantiles with the chunk that drives the feature highlighted, and near misses.
The interpreter service picks them (it holds the run's vectors, chunks and codes); texts come
from the catalogue."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from contracts.examples import Example, ExamplesRequest, FeatureExamples
from gateway.dashboard.sae_pages import sae_run_or_404
from gateway.dashboard.views import render
from gateway.deps import SessionDep, require_login
from gateway.domain.auth import trail
from gateway.domain.features.interpret import interpreter_corpus
from gateway.domain.runs import repo as run_repo
from gateway.search.expressions import SegmentCodes
from gateway.search.repo import documents_at
from gateway.search.space import SearchNotReady, load_search_space
from gateway.services import ServiceError, ServiceUnavailable

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
EXCERPT_CHARS = 420


class Excerpt(NamedTuple):
    """Pieces of a document around its driving chunk; the template escapes each and marks `chunk`."""

    before: str
    chunk: str
    after: str
    cut_start: bool
    cut_end: bool


def excerpt(text: str, span: tuple[int, int] | None, max_chars: int = EXCERPT_CHARS) -> Excerpt:
    """At most about max_chars of text around span (the start when None); a long chunk is cut too."""
    if span is None:
        end = min(len(text), max_chars)
        return Excerpt(text[:end], "", "", False, end < len(text))
    s, e = max(0, span[0]), min(len(text), span[1])
    chunk = text[s:e]
    if len(chunk) >= max_chars:
        return Excerpt("", chunk[:max_chars], "", s > 0, True)
    side = (max_chars - len(chunk)) // 2
    lo, hi = max(0, s - side), min(len(text), e + side)
    return Excerpt(text[lo:s], chunk, text[e:hi], lo > 0, hi < len(text))


def with_texts(examples: list[Example], docs: dict[int, Any],
               spans: dict[int, tuple[int, int]] | None = None) -> list[dict[str, Any]]:
    """Each example with its document and excerpt, around `spans[position]` where given (else its own span)."""
    spans = spans or {}
    return [{"ex": ex, "doc": docs[ex.position],
             "excerpt": excerpt(docs[ex.position].text, spans.get(ex.position, ex.span))}
            for ex in examples if ex.position in docs]


def strongest_segments(segments: SegmentCodes, feature: int, positions: list[int]) -> dict[int, tuple[int, int]]:
    """For each document position, the (start, end) characters of its segment where `feature` is strongest;
    a document where it fires on no segment is left out. A run with segment codes gives a document the max
    over its segments' codes, so that segment is what makes the document fire."""
    column = segments.codes[:, feature]  # CSC [segments, 1]: the rows where the feature fires, sorted
    rows, acts = column.indices, column.data
    wanted = np.asarray(positions, dtype=np.int64)
    firsts, ends = np.searchsorted(segments.doc, wanted, side="left"), np.searchsorted(segments.doc, wanted, side="right")
    out = {}
    for p, lo, hi in zip(positions, firsts, ends):
        a, b = np.searchsorted(rows, lo), np.searchsorted(rows, hi)  # the feature's entries among p's segments
        if b > a and acts[a:b].max() > 0:
            s = int(rows[a + int(np.argmax(acts[a:b]))])
            out[p] = (int(segments.spans[s, 0]), int(segments.spans[s, 1]))
    return out


@router.get("/sae-runs/{run_id}/features/{index}/examples", response_class=HTMLResponse)
async def feature_examples(request: Request, run_id: int, index: int, session: SessionDep) -> Response:
    run = sae_run_or_404(session, run_id)
    if run.status != "succeeded" or not 0 <= index < (run.n_latents or 0):
        return render(request, "partials/_feature_examples.html", {"error": f"feature {index}: no documents to show"})
    state = request.app.state
    try:
        ref = interpreter_corpus(session, run.id)
        raw = await state.services.post("interpreter", "/examples",
                                        ExamplesRequest(corpus=ref, feature=index).model_dump(mode="json"))
    except (ServiceError, ServiceUnavailable) as exc:
        return render(request, "partials/_feature_examples.html", {"error": f"documents unavailable: {exc}"})
    found = FeatureExamples.model_validate(raw)
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    positions = [e.position for e in found.activating + found.near_misses]
    docs = documents_at(session, dataset_id=emb.dataset_id, positions=positions)
    trail.record_read(session, "feature.examples", dataset_id=emb.dataset_id, count=len(docs), sae_run_id=run.id,
                      feature=index)
    try:  # a run with segment codes: mark the segment (clause) that fires, not a 512-token chunk
        segments = load_search_space(session, state.store, run).segment_codes()
    except SearchNotReady:
        segments = None
    spans = strongest_segments(segments, index, [e.position for e in found.activating]) if segments else {}
    ctx = {"run": run, "found": found, "activating": with_texts(found.activating, docs, spans),
           "near_misses": with_texts(found.near_misses, docs), "dataset_id": emb.dataset_id,
           "marked": "segment" if segments else "chunk"}
    return render(request, "partials/_feature_examples.html", ctx)
