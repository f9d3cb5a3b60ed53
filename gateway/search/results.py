"""Turning matches into pages: ranking, the features active in each document, documents by position."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from contracts.search import DocumentHit, FeatureHit, SegmentHit
from gateway.domain.features import repo as feature_repo
from gateway.search import repo
from gateway.search.expressions import SearchSpace

EXCERPT_CHARS = 300
EXCERPT_CONTEXT = 60  # characters kept before a matched segment when the excerpt moves to it
EXCERPT_LINES_BEFORE = 2  # line breaks kept before a matched segment at most


def page_by_score(positions: np.ndarray, scores: np.ndarray, *, offset: int, limit: int) -> np.ndarray:
    """positions[offset : offset+limit] in the order score descending, then position ascending.

    Only the candidates that can reach the page are sorted: everything scoring at least the
    (offset+limit)-th best score, ties included, so that pages never overlap or skip."""
    need = offset + limit
    if len(positions) > 4 * need:
        threshold = -np.partition(-scores, need - 1)[need - 1]
        keep = scores >= threshold
        positions, scores = positions[keep], scores[keep]
    order = np.lexsort((positions, -scores))
    return positions[order][offset:need]


def activations_at(codes: sp.csc_matrix, features: Sequence[int], positions: np.ndarray) -> np.ndarray:
    """float32 [len(positions), len(features)]: each feature's activation in each document, read
    from the CSC columns (a column's rows are sorted, so a binary search finds each document)."""
    out = np.zeros((len(positions), len(features)), dtype=np.float32)
    for j, f in enumerate(features):
        start, end = codes.indptr[f], codes.indptr[f + 1]
        rows, vals = codes.indices[start:end], codes.data[start:end]
        if not codes.has_sorted_indices:
            order = np.argsort(rows)
            rows, vals = rows[order], vals[order]
        if len(rows) == 0:
            continue
        at = np.minimum(np.searchsorted(rows, positions), len(rows) - 1)
        found = rows[at] == positions
        out[found, j] = vals[at[found]]
    return out


def feature_labels(session: Session, *, sae_run_id: int, indices: Sequence[int]) -> dict[int, tuple[str | None, bool | None]]:
    """index → (shown label, reliable) for the given features (None, None where unnamed)."""
    found = feature_repo.labels_by_index(session, sae_run_id=sae_run_id, indices=list(indices))
    return {i: found.get(i, (None, None)) for i in indices}


def matched_segments(space: SearchSpace, matched: np.ndarray | None, features: Sequence[int],
                     positions: np.ndarray) -> tuple[list[SegmentHit | None], np.ndarray | None]:
    """Per position, the segment its match came through (`matched`: Match.segment; None where none), and
    float32 [len(positions), len(features)]: each feature's activation in that segment (zeros where there is
    none), or None when the match read no segment."""
    segments = space.segment_codes() if matched is not None else None
    if matched is None or segments is None:
        return [None] * len(positions), None
    rows = matched[positions]
    hits = [None if s < 0 else SegmentHit(index=s, start=int(segments.spans[s, 0]), end=int(segments.spans[s, 1]))
            for s in rows.tolist()]
    acts = activations_at(segments.codes, features, np.maximum(rows, 0))
    acts[rows < 0] = 0
    return hits, acts


def excerpt_around(text: str, segment: SegmentHit | None) -> tuple[int, str]:
    """(start, EXCERPT_CHARS of text from start): from 0, unless the segment ends further on or more than
    EXCERPT_LINES_BEFORE line breaks come before it; then from a little before the segment (from its start
    when it is longer than an excerpt), at most EXCERPT_LINES_BEFORE line breaks before it and not from the
    middle of a word. A page shows an excerpt's first lines only (the search results' `.doc-text` clips at
    five): a note's short header lines ("Indagini:\nTest RSV non eseguito.\n\nConclusione diagnostica\n")
    would push the segment out of sight."""
    if segment is None or (segment.end <= EXCERPT_CHARS
                           and text.count("\n", 0, segment.start) <= EXCERPT_LINES_BEFORE):
        return 0, text[:EXCERPT_CHARS]
    start = max(0, min(segment.start, max(segment.end - EXCERPT_CHARS, segment.start - EXCERPT_CONTEXT)))
    breaks = [start + i for i, c in enumerate(text[start:segment.start]) if c == "\n"]
    if len(breaks) > EXCERPT_LINES_BEFORE:
        start = breaks[-EXCERPT_LINES_BEFORE - 1] + 1
    if 0 < start < segment.start and text[start - 1].isalnum():  # not from the middle of a word
        start = min(segment.start, start + len(re.match(r"\w*\W*", text[start:segment.start]).group(0)))
    while start < segment.start and text[start] == "\n":  # no blank line first
        start += 1
    return start, text[start:start + EXCERPT_CHARS]


def document_hits(session: Session, *, dataset_id: int, positions: np.ndarray, scores: Sequence[float],
                  features: Sequence[int], acts: np.ndarray, names: dict[int, tuple[str | None, bool | None]],
                  segments: Sequence[SegmentHit | None] | None = None,
                  segment_acts: np.ndarray | None = None) -> list[DocumentHit]:
    """One hit per position (in the given order) with the given features active in it, strongest
    first, and the segment it matched through (its excerpt then shows that segment) with the features
    active in that segment (`segment_acts`, as matched_segments gives them)."""
    docs = repo.documents_at(session, dataset_id=dataset_id, positions=[int(p) for p in positions])
    segments = segments if segments is not None else [None] * len(positions)

    def named(values: np.ndarray) -> list[FeatureHit]:
        active = sorted(((features[j], float(values[j])) for j in range(len(features)) if values[j] != 0),
                        key=lambda fa: -fa[1])
        return [FeatureHit(index=f, activation=a, label=names.get(f, (None, None))[0],
                           reliable=names.get(f, (None, None))[1]) for f, a in active]

    hits = []
    for row, (pos, score) in enumerate(zip(positions.tolist(), scores)):
        doc = docs.get(pos)
        start, excerpt = excerpt_around(doc.text, segments[row]) if doc else (0, "")
        in_segment = (named(segment_acts[row]) if segment_acts is not None and segments[row] is not None
                      else None)
        hits.append(DocumentHit(
            position=pos, document_id=doc.id if doc else None, external_id=doc.external_id if doc else None,
            score=float(score), excerpt=excerpt, excerpt_start=start, segment=segments[row],
            labels=list(doc.labels) if doc else [], features=named(acts[row]), segment_features=in_segment,
        ))
    return hits
