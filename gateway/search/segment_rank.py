"""Text search that reads a run's segments: each document is ranked by the mean of two cosines to the
query, its own vector's and its best segment's (the best-passage rule of passage retrieval: "MaxP",
Dai & Callan 2019), and the hit shows that segment.

Why: a note's vector is the average of everything the note says, and clinical notes say much the
same stock phrases ("Torace: MV fisiologico."); the clause that names the condition is diluted in it.
Measured on the demo's notes (`bench/text_search.py`), each condition's name as a query: average
precision 0.652 by the note vectors, 0.735 by the best clause alone, 0.778 by the mean of the two. On
the real Medical Abstracts the mean is better than either too (known-item MRR 0.937 by the abstract,
0.862 by its best clause, 0.943 by the mean; bench/results/text-search.json).

Exact, with no approximate index: the query's cosine to every *distinct* segment vector (segments
whose text is the same share one vector in a run, `services/embedder/distinct.py`, so only those
are stored) and to every document, then the top of the mean by the threshold rule (`rank`), which
reads the segments of only the documents that hold the query's best-matching segments. A run whose
distinct segments pass `search_segments_max` keeps the FAISS document index alone (`text_index.py`):
the vectors are held in memory as float32.
Built once per run, stored as one artifact beside the FAISS index, loaded once per process
(`text_index.py` keeps both).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

KIND = "text-segments"


class SegmentRanker(NamedTuple):
    """What ranking needs, every document with at least one segment (the embedder gives each one)."""

    documents: np.ndarray  # float32 [N, d], unit rows: the documents' own vectors
    distinct: np.ndarray  # float32 [U, d], unit rows: each distinct segment vector once
    row_distinct: np.ndarray  # int32 [S]: each segment row's distinct vector
    doc_start: np.ndarray  # int64 [N]: each document's first segment row (rows in position order)
    char_start: np.ndarray  # int32 [S]
    char_end: np.ndarray  # int32 [S]
    # derived, not stored: each row's document, and the rows of each distinct vector (CSR)
    row_doc: np.ndarray  # int32 [S]
    rows_ptr: np.ndarray  # int64 [U + 1]
    rows_of: np.ndarray  # int64 [S]: rows sorted by their distinct vector


def _ranker(documents: np.ndarray, distinct: np.ndarray, row_distinct: np.ndarray, doc_start: np.ndarray,
            char_start: np.ndarray, char_end: np.ndarray) -> SegmentRanker:
    n_rows = len(row_distinct)
    counts = np.diff(np.append(doc_start, n_rows))
    row_doc = np.repeat(np.arange(len(doc_start), dtype=np.int32), counts)
    rows_of = np.argsort(row_distinct, kind="stable")
    rows_ptr = np.zeros(len(distinct) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_distinct, minlength=len(distinct)), out=rows_ptr[1:])
    return SegmentRanker(_unit(documents), _unit(distinct), row_distinct, doc_start, char_start, char_end,
                         row_doc, rows_ptr, rows_of)


class Ranked(NamedTuple):
    positions: np.ndarray  # int64 [m]: dataset positions, best first
    scores: np.ndarray  # float32 [m]: mean of the document's cosine and its best segment's
    segments: np.ndarray  # int64 [m]: each document's best segment row


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def build(documents: np.ndarray, shards: Iterable[dict[str, np.ndarray]], *, max_distinct: int) -> SegmentRanker | None:
    """From the documents' vectors [N, d] (position order) and the run's segment shards in order
    (arrays `vectors`, `position`, `char_start`, `char_end`): None when the distinct segments pass
    `max_distinct`. Segments are the same vector when their float16 bytes are (copies share one)."""
    slot: dict[bytes, int] = {}
    distinct: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    positions: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for shard in shards:
        v = np.ascontiguousarray(shard["vectors"], dtype=np.float16)
        keys, first, inverse = np.unique(v.view(np.dtype((np.void, v.shape[1] * 2))).ravel(),
                                         return_index=True, return_inverse=True)
        ids = np.empty(len(keys), dtype=np.int32)
        for j, key in enumerate(keys.tolist()):
            found = slot.get(key)
            if found is None:
                if len(slot) >= max_distinct:
                    return None
                found = slot[key] = len(slot)
                distinct.append(v[first[j]])
            ids[j] = found
        rows.append(ids[inverse.ravel()])
        positions.append(np.asarray(shard["position"], dtype=np.int64))
        starts.append(np.asarray(shard["char_start"], dtype=np.int32))
        ends.append(np.asarray(shard["char_end"], dtype=np.int32))
    position = np.concatenate(positions) if positions else np.zeros(0, np.int64)
    n = len(documents)
    doc_start = np.searchsorted(position, np.arange(n))
    if len(position) == 0 or np.any(np.diff(np.append(doc_start, len(position))) <= 0):
        raise ValueError("every document needs at least one segment")
    d = documents.shape[1]
    return _ranker(documents, np.stack(distinct) if distinct else np.zeros((0, d), np.float32),
                   np.concatenate(rows), doc_start.astype(np.int64), np.concatenate(starts), np.concatenate(ends))


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges: starts[i], starts[i] + 1, ..., starts[i] + lengths[i] - 1 for each i."""
    total = int(lengths.sum())
    offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + (np.arange(total) - offsets)


def rank(ranker: SegmentRanker, query: np.ndarray, k: int) -> Ranked:
    """The k best documents for one query vector [d] (normalised here), exactly, best first (ties by
    position). The threshold rule of top-k aggregation (Fagin's): the m best distinct segments bound
    every other segment's cosine by the m-th's, t; only the documents holding one of them are scored
    in full (their every segment), and if the k-th of those is at least the best any other document
    could reach, (its own cosine + t) / 2, they are the answer; else every document is scored (widening
    step by step cost more than that on queries with no clear best segment: bench/text_search.py). A
    clause that a query matches well and that few documents hold is the common case: a few hundred rows
    read, not every segment of the run."""
    q = _unit(np.asarray(query, dtype=np.float32).reshape(1, -1))[0]
    n = len(ranker.documents)
    k = min(k, n)
    if k <= 0:
        return Ranked(np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64))
    s = ranker.distinct @ q  # [U]
    d = ranker.documents @ q  # [N]
    ends = np.append(ranker.doc_start[1:], len(ranker.row_distinct))
    m = min(len(s), max(4 * k, 64))
    for _ in range(2):  # the rule once; where it does not settle, every document
        if m < len(s):
            top = np.argpartition(-s, m - 1)[:m]
            bound = float(s[top].min())
            held = ranker.rows_of[_ranges(ranker.rows_ptr[top], ranker.rows_ptr[top + 1] - ranker.rows_ptr[top])]
            cand = np.unique(ranker.row_doc[held]).astype(np.int64)
        else:  # every document: its rows are every row, in order
            cand = np.arange(n, dtype=np.int64)
            score = (d + np.maximum.reduceat(s[ranker.row_distinct], ranker.doc_start)) / 2
            break
        lengths = ends[cand] - ranker.doc_start[cand]
        per_row = s[ranker.row_distinct[_ranges(ranker.doc_start[cand], lengths)]]
        best = np.maximum.reduceat(per_row, np.cumsum(lengths) - lengths)
        score = (d[cand] + best) / 2
        if len(cand) >= k:
            kth = -np.partition(-score, k - 1)[k - 1]
            others = np.ones(n, dtype=bool)
            others[cand] = False
            reach = (float(d[others].max()) + bound) / 2 if others.any() else -np.inf
            if kth > reach:
                break
        m = len(s)
    part = np.argpartition(-score, k - 1)[:k] if k < len(score) else np.arange(len(score))
    order = part[np.lexsort((cand[part], -score[part]))]
    top_docs = cand[order]
    segs = np.array([a + int(np.argmax(s[ranker.row_distinct[a:b]]))
                     for a, b in zip(ranker.doc_start[top_docs].tolist(), ends[top_docs].tolist())], dtype=np.int64)
    return Ranked(top_docs, score[order].astype(np.float32), segs)


def to_bytes(ranker: SegmentRanker) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, documents=ranker.documents.astype(np.float16), distinct=ranker.distinct.astype(np.float16),
             row_distinct=ranker.row_distinct, doc_start=ranker.doc_start, char_start=ranker.char_start,
             char_end=ranker.char_end)
    return buf.getvalue()


def from_bytes(data: bytes) -> SegmentRanker:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return _ranker(z["documents"], z["distinct"], z["row_distinct"], z["doc_start"], z["char_start"],
                       z["char_end"])
