"""One document as an SAE run reads it: the features active in it and, in a run with segment codes, in each of
its segments (clauses or sentences), strongest first. Pure (no database): `service.document_features` names them.

The codes are CSC (the searches read columns), so a document's rows are found column by column: each column's
rows are sorted, and two binary searches a column find the document's entries. The cost grows with the number
of features, not with the corpus (a mask over every entry would read and allocate the whole matrix: 230 million
entries for 200,000 notes of 36 clauses at k = 32).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gateway.search.expressions import SearchSpace

Active = list[tuple[int, float]]  # (feature, activation), strongest first


def rows_active(codes: sp.csc_matrix, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row - lo, feature, activation) of every stored nonzero of rows [lo, hi) of `codes`, by feature."""
    indptr, indices, data = codes.indptr, codes.indices, codes.data
    if not codes.has_sorted_indices:  # never the case for codes made by tocsc(); kept correct regardless
        keep = np.flatnonzero((indices >= lo) & (indices < hi))
        feats = np.searchsorted(indptr, keep, side="right") - 1
        order = np.lexsort((indices[keep], feats))
        keep, feats = keep[order], feats[order]
        return indices[keep].astype(np.int64) - lo, feats.astype(np.int64), data[keep]
    rows, feats, vals = [], [], []
    for f in np.flatnonzero(np.diff(indptr)).tolist():
        a, b = int(indptr[f]), int(indptr[f + 1])
        column = indices[a:b]
        i, j = np.searchsorted(column, (lo, hi))
        if j > i:
            rows.append(column[i:j].astype(np.int64) - lo)
            feats.append(np.full(j - i, f, dtype=np.int64))
            vals.append(data[a + i:a + j])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    return np.concatenate(rows), np.concatenate(feats), np.concatenate(vals)


def strongest(features: np.ndarray, values: np.ndarray, limit: int) -> Active:
    """The `limit` nonzero (feature, activation) pairs of largest activation; ties by feature index."""
    nonzero = values != 0
    features, values = features[nonzero], values[nonzero]
    order = np.lexsort((features, -values))[:limit]
    return [(int(features[o]), float(values[o])) for o in order]


@dataclass(frozen=True)
class SegmentReading:
    index: int  # the segment's row among the run's segments
    start: int
    end: int
    n_active: int
    features: Active
    marked: float | None = None  # the `mark` feature's activation here (0 where silent); None without one


@dataclass(frozen=True)
class DocumentReading:
    n_active: int
    features: Active
    n_segments: int | None  # None: the run has no segment codes
    segments: list[SegmentReading] | None  # those of [segment_offset, segment_offset + segment_limit)
    marked: float | None = None  # the `mark` feature's activation in the document; None without one


def _activation(features: np.ndarray, values: np.ndarray, mark: int | None) -> float | None:
    """`mark`'s activation among a row's entries (a feature has one entry a row at most; 0 where it has none)."""
    return None if mark is None else float(values[features == mark].sum())


def read_document(space: SearchSpace, position: int, *, limit: int, per_segment: int, segment_offset: int = 0,
                  segment_limit: int = 200, mark: int | None = None) -> DocumentReading:
    """The features of the document at `position` (its row of the codes) and of a page of its segments; with
    `mark`, that feature's activation in each, read from the same rows."""
    codes = space.codes
    if 0 <= position < codes.shape[0]:
        _, feats, vals = rows_active(codes, position, position + 1)
    else:  # a document the run did not encode (never, for a run of the document's own dataset)
        feats, vals = np.zeros(0, np.int64), np.zeros(0, np.float32)
    top = strongest(feats, vals, limit)
    seg = space.segment_codes()
    if seg is None:
        return DocumentReading(int(np.count_nonzero(vals)), top, None, None, _activation(feats, vals, mark))
    first, end = (int(x) for x in np.searchsorted(seg.doc, [position, position + 1]))
    lo, hi = min(end, first + segment_offset), min(end, first + segment_offset + segment_limit)
    rows, sfeats, svals = rows_active(seg.codes, lo, hi)
    order = np.argsort(rows, kind="stable")
    rows, sfeats, svals = rows[order], sfeats[order], svals[order]
    bounds = np.searchsorted(rows, np.arange(hi - lo + 1))
    segments = []
    for r in range(hi - lo):
        f, v = sfeats[bounds[r]:bounds[r + 1]], svals[bounds[r]:bounds[r + 1]]
        segments.append(SegmentReading(index=lo + r, start=int(seg.spans[lo + r, 0]), end=int(seg.spans[lo + r, 1]),
                                       n_active=int(np.count_nonzero(v)), features=strongest(f, v, per_segment),
                                       marked=_activation(f, v, mark)))
    return DocumentReading(int(np.count_nonzero(vals)), top, end - first, segments, _activation(feats, vals, mark))
