"""Text search that reads a run's segments: each document is ranked by the mean of two cosines to the
query, its own vector's and its best segment's (the best-passage rule of passage retrieval: "MaxP",
Dai & Callan 2019), and the hit shows that segment.

Why: a note's vector is the average of everything the note says, and clinical notes say much the
same stock phrases ("Torace: MV fisiologico."); the clause that names the condition is diluted in it.
Measured on the demo's notes (`bench/text_search.py`), each condition's name as a query: average
precision 0.652 by the note vectors, 0.735 by the best clause alone, 0.778 by the mean of the two; on
the real Medical Abstracts see bench/results/text-search.json.

Exact, with no approximate index: the query's cosine to every *distinct* segment vector (segments
whose text is the same share one vector in a run, `services/embedder/distinct.py`, so only those
are stored), the best per document by `np.maximum.reduceat` over the documents' rows, the documents'
own cosines, then the top of the mean. A run whose distinct segments pass `search_segments_max`
keeps the FAISS document index alone (`text_index.py`): the vectors are held in memory as float32.
Built once per run, stored as one artifact beside the FAISS index, loaded once per process.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
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
    return SegmentRanker(_unit(documents), _unit(np.stack(distinct)) if distinct else np.zeros((0, d), np.float32),
                         np.concatenate(rows), doc_start.astype(np.int64), np.concatenate(starts),
                         np.concatenate(ends))


def rank(ranker: SegmentRanker, query: np.ndarray, k: int) -> Ranked:
    """The k best documents for one query vector [d] (normalised here), exactly."""
    q = _unit(np.asarray(query, dtype=np.float32).reshape(1, -1))[0]
    per_row = (ranker.distinct @ q)[ranker.row_distinct]  # [S]
    best = np.maximum.reduceat(per_row, ranker.doc_start)  # [N]
    score = (ranker.documents @ q + best) / 2
    k = min(k, len(score))
    top = np.argpartition(-score, k - 1)[:k] if 0 < k < len(score) else np.arange(k)
    top = top[np.lexsort((top, -score[top]))]  # best first, ties by position
    ends = np.append(ranker.doc_start[1:], len(per_row))
    seg = np.array([s + int(np.argmax(per_row[s:e])) for s, e in zip(ranker.doc_start[top].tolist(),
                                                                        ends[top].tolist())], dtype=np.int64)
    return Ranked(top.astype(np.int64), score[top].astype(np.float32), seg)


def to_bytes(ranker: SegmentRanker) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, documents=ranker.documents.astype(np.float16), distinct=ranker.distinct.astype(np.float16),
             row_distinct=ranker.row_distinct, doc_start=ranker.doc_start, char_start=ranker.char_start,
             char_end=ranker.char_end)
    return buf.getvalue()


def from_bytes(data: bytes) -> SegmentRanker:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return SegmentRanker(_unit(z["documents"]), _unit(z["distinct"]), z["row_distinct"], z["doc_start"],
                             z["char_start"], z["char_end"])


class _Cache:
    """Loaded rankers by URI (a few runs)."""

    def __init__(self, size: int = 2) -> None:
        self.size, self.lock = size, threading.Lock()
        self.loaded: OrderedDict[str, SegmentRanker] = OrderedDict()

    def get(self, read: callable, uri: str) -> SegmentRanker:  # type: ignore[valid-type]
        with self.lock:
            if uri in self.loaded:
                self.loaded.move_to_end(uri)
                return self.loaded[uri]
        ranker = from_bytes(read(uri))
        with self.lock:
            self.loaded[uri] = ranker
            while len(self.loaded) > self.size:
                self.loaded.popitem(last=False)
        return ranker

    def forget(self, prefixes: tuple[str, ...]) -> None:
        with self.lock:
            for uri in [u for u in self.loaded if u.startswith(prefixes)]:
                del self.loaded[uri]


cache = _Cache()
