"""FAISS index of an embedding run's document vectors, for text search (inner product on unit
vectors = cosine). Exact (IndexFlatIP) up to `search_flat_max_docs` documents; above, HNSW or IVF
as `search_large_index` says. Built from the run's shards, stored as one artifact, catalogued,
and loaded once per process. Index ids are dataset positions (the shards' row order).
"""

from __future__ import annotations

import io
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Literal, NamedTuple

import faiss
import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.embed import IN_CONTEXT_UNITS
from gateway.db import session_scope
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.runs import repo as run_repo
from gateway.search import segment_rank

log = logging.getLogger(__name__)
KIND = "faiss-index"
IndexKind = Literal["flat", "hnsw", "ivf"]
HNSW_M = 32  # neighbours per node: FAISS's usual default for ~1M vectors
IVF_TRAIN_MAX = 100_000  # vectors sampled to train IVF centroids
# One query scans memory (d × docs floats): a second OpenMP thread barely helps on an idle machine
# and costs 3× under load (threads spin waiting for each other; measured: 45 vs 124 ms on 200k × 384
# with the CPUs shared). Concurrency comes from concurrent requests instead. Builds use every CPU.
QUERY_THREADS = 1


class Neighbours(NamedTuple):
    positions: np.ndarray  # int64 [m]: dataset positions, nearest first
    scores: np.ndarray  # float32 [m]: cosine similarity


def choose_kind(n_docs: int, *, flat_max_docs: int, large: Literal["hnsw", "ivf"]) -> IndexKind:
    return "flat" if n_docs <= flat_max_docs else large


def index_key(run_id: int, kind: IndexKind) -> str:
    return f"embedding-runs/{run_id}/search/{kind}.faiss"


def read_shards(store: ArtifactStore, shard_uris: list[str]) -> np.ndarray:
    """The run's vectors in position order, float32 [docs, d], each row scaled to unit norm."""
    parts = [np.load(io.BytesIO(store.read_bytes(uri))).astype(np.float32, copy=False) for uri in shard_uris]
    vectors = np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros((0, 1), np.float32))
    faiss.normalize_L2(vectors)
    return vectors


def build_index(vectors: np.ndarray, kind: IndexKind, *, seed: int = 0) -> faiss.Index:
    """An inner-product index of unit vectors [docs, d]; ids are row numbers."""
    n, d = vectors.shape
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    if kind == "flat":
        index = faiss.IndexFlatIP(d)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = 128  # recall over speed: queries are one at a time
    else:
        nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))  # FAISS wants ≥ 39 training points a centroid
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(seed)
        sample = vectors[np.sort(rng.choice(n, min(n, IVF_TRAIN_MAX), replace=False))]
        index.train(sample)
        index.nprobe = min(nlist, 16)
    index.add(vectors)
    return index


def search(index: faiss.Index, query: np.ndarray, k: int) -> Neighbours:
    """The k nearest documents to one query vector [d] (normalised here), nearest first."""
    q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
    faiss.normalize_L2(q)
    k = min(k, index.ntotal)
    if k <= 0:
        return Neighbours(np.zeros(0, np.int64), np.zeros(0, np.float32))
    faiss.omp_set_num_threads(QUERY_THREADS)
    scores, ids = index.search(q, k)
    keep = ids[0] >= 0  # HNSW / IVF may return fewer than k
    return Neighbours(ids[0][keep].astype(np.int64), scores[0][keep].astype(np.float32))


class _IndexCache:
    """Loaded FAISS indexes and segment rankers by URI (a few runs of each), and one build at a time per run."""

    def __init__(self, size: int = 2) -> None:
        self.size, self.lock = size, threading.Lock()
        self.loaded: dict[str, OrderedDict[str, Any]] = {KIND: OrderedDict(), segment_rank.KIND: OrderedDict()}
        self.building: dict[int, threading.Lock] = {}
        # (the run's folder URI, flat_max_docs, large) -> its catalogued index URI: a run's vectors
        # never change once it has succeeded, so neither does its index.
        self.known: dict[tuple[str, int, str], str | None] = {}

    def get(self, kind: str, uri: str, load: Callable[[], Any]) -> Any:
        loaded = self.loaded[kind]
        with self.lock:
            if uri in loaded:
                loaded.move_to_end(uri)
                return loaded[uri]
        value = load()
        with self.lock:
            loaded[uri] = value
            while len(loaded) > self.size:
                loaded.popitem(last=False)
        return value

    def build_lock(self, run_id: int) -> threading.Lock:
        with self.lock:
            return self.building.setdefault(run_id, threading.Lock())


_cache = _IndexCache()


def forget_runs(store: ArtifactStore, run_ids: list[int]) -> None:
    """Drop what this process remembers of these embedding runs' indexes (the runs were deleted)."""
    folders = tuple(store.uri(f"embedding-runs/{i}").rstrip("/") + "/" for i in run_ids)
    with _cache.lock:
        for memo in [m for m in _cache.known if (m[0].rstrip("/") + "/").startswith(folders)]:
            del _cache.known[memo]
        for loaded in _cache.loaded.values():
            for uri in [u for u in loaded if u.startswith(folders)]:
                del loaded[uri]


def _catalogued(session: Session, run_id: int, key: str, store: ArtifactStore, kind: str) -> str | None:
    uri = store.uri(key)
    found = [a for a in artifact_repo.for_owner(session, owner_type="embedding_run", owner_id=run_id)
             if a.kind == kind and a.uri == uri]
    return uri if found and store.exists(uri) else None


def ensure_index(factory: sessionmaker[Session], store: ArtifactStore, run_id: int, *, flat_max_docs: int,
                 large: Literal["hnsw", "ivf"]) -> str:
    """The URI of the run's index, built (and catalogued) first if it is missing. Blocking: call it
    in a thread. Raises LookupError when the run has no vectors."""
    memo = (store.uri(f"embedding-runs/{run_id}"), flat_max_docs, large)
    if (known := _cache.known.get(memo)) is not None:
        return known
    uri = _ensure_index(factory, store, run_id, flat_max_docs=flat_max_docs, large=large)
    _cache.known[memo] = uri
    return uri


def _ensure_index(factory: sessionmaker[Session], store: ArtifactStore, run_id: int, *, flat_max_docs: int,
                  large: Literal["hnsw", "ivf"]) -> str:
    with session_scope(factory) as session:
        run = run_repo.get_embedding_run(session, run_id=run_id)
        if run is None or run.status != "succeeded" or not (run.result or {}).get("shards"):
            raise LookupError(f"embedding run {run_id} has no vectors to search")
        kind = choose_kind(run.n_documents or 0, flat_max_docs=flat_max_docs, large=large)
        key, shards = index_key(run_id, kind), [s["uri"] for s in run.result["shards"]]
        uri = _catalogued(session, run_id, key, store, KIND)
    if uri is not None:
        return uri
    with _cache.build_lock(run_id):
        with session_scope(factory) as session:
            uri = _catalogued(session, run_id, key, store, KIND)
        if uri is not None:  # built meanwhile by another request
            return uri
        index = build_index(read_shards(store, shards), kind)
        info: ArtifactInfo = store.write_bytes(key, faiss.serialize_index(index).tobytes(), kind=KIND)
        with session_scope(factory) as session:
            artifact_repo.record(session, info=info, owner_type="embedding_run", owner_id=run_id)
        log.info("built text index", extra={"embedding_run_id": run_id, "kind": kind, "documents": index.ntotal})
        return info.uri


def load_index(store: ArtifactStore, uri: str) -> faiss.Index:
    return _cache.get(KIND, uri, lambda: faiss.deserialize_index(np.frombuffer(store.read_bytes(uri), dtype=np.uint8)))


def segments_key(run_id: int) -> str:
    return f"embedding-runs/{run_id}/search/segments.npz"


def segment_shards(store: ArtifactStore, uris: list[str]) -> Iterator[dict[str, np.ndarray]]:
    for uri in uris:
        with np.load(io.BytesIO(store.read_bytes(uri)), allow_pickle=False) as z:
            yield {name: z[name] for name in ("vectors", "position", "char_start", "char_end")}


def rankable_segments(result: dict) -> list[str]:
    """The URIs of the segment shards an embedding run's text search ranks notes by: none for word or token
    segments (a word's state in its note is not in the space of a query's pooled vector)."""
    if result.get("segment_unit") in IN_CONTEXT_UNITS:
        return []
    return [s["uri"] for s in result.get("segments") or []]


def ensure_segment_ranker(factory: sessionmaker[Session], store: ArtifactStore, run_id: int, *,
                          max_distinct: int) -> str | None:
    """The URI of the run's segment ranker (segment_rank.py), built (and catalogued) first if it is
    missing; None when the run has no segments or more than `max_distinct` distinct ones. Blocking."""
    memo = (store.uri(f"embedding-runs/{run_id}"), max_distinct, segment_rank.KIND)
    if memo in _cache.known:
        return _cache.known[memo]
    with session_scope(factory) as session:
        run = run_repo.get_embedding_run(session, run_id=run_id)
        if run is None or run.status != "succeeded" or not (run.result or {}).get("shards"):
            raise LookupError(f"embedding run {run_id} has no vectors to search")
        shards = [s["uri"] for s in run.result["shards"]]
        segments = rankable_segments(run.result)
        key = segments_key(run_id)
        uri = _catalogued(session, run_id, key, store, segment_rank.KIND) if segments else None
    if uri is None and segments:
        with _cache.build_lock(run_id):
            with session_scope(factory) as session:
                uri = _catalogued(session, run_id, key, store, segment_rank.KIND)
            if uri is None:
                ranker = segment_rank.build(read_shards(store, shards), segment_shards(store, segments),
                                            max_distinct=max_distinct)
                if ranker is not None:
                    info = store.write_bytes(key, segment_rank.to_bytes(ranker), kind=segment_rank.KIND)
                    with session_scope(factory) as session:
                        artifact_repo.record(session, info=info, owner_type="embedding_run", owner_id=run_id)
                    log.info("built segment ranker", extra={"embedding_run_id": run_id,
                                                            "distinct_segments": len(ranker.distinct)})
                    uri = info.uri
    _cache.known[memo] = uri
    return uri


def load_segment_ranker(store: ArtifactStore, uri: str) -> segment_rank.SegmentRanker:
    return _cache.get(segment_rank.KIND, uri, lambda: segment_rank.from_bytes(store.read_bytes(uri)))


def build_after_run(factory: sessionmaker[Session], store: ArtifactStore, settings: Any, run_id: int) -> None:
    """Build the index as soon as an embedding run succeeds, so the first text search does not wait.
    Blocking. A failure is logged, not raised: the run's vectors are fine, and the first text
    search builds the index again."""
    try:
        ensure_index(factory, store, run_id, flat_max_docs=settings.search_flat_max_docs,
                     large=settings.search_large_index)
        ensure_segment_ranker(factory, store, run_id, max_distinct=settings.search_segments_max)
    except Exception as exc:  # noqa: BLE001 - the run has succeeded; the index is a cache of it
        log.warning("text index not built", extra={"embedding_run_id": run_id, "error": type(exc).__name__})


def run_vectors(factory: sessionmaker[Session], store: ArtifactStore, run_id: int) -> np.ndarray | None:
    """The embedding run's document vectors in position order at unit norm, float32 [docs, d]; None without any."""
    with session_scope(factory) as session:
        run = run_repo.get_embedding_run(session, run_id=run_id)
        shards = [s["uri"] for s in ((run.result or {}).get("shards") or [])] if run is not None else []
    return read_shards(store, shards) if shards else None
