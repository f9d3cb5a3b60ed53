"""The search space of an SAE run: its codes (CSC, read once per process) with its shown labels
and families (from the database, re-read only when they change), and its segment codes when the
run has them (read on the first SEGMENT(…), then kept like the codes)."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from artifacts import ArtifactStore
from gateway.domain.runs.models import SaeRun
from gateway.search import repo
from gateway.search.expressions import SearchSpace, SegmentCodes

MAX_CACHED_RUNS = 4  # 200,000 documents × k=32 is ~50 MB of CSC per run
MAX_CACHED_SEGMENT_RUNS = 2  # ten segments a document make ten times that
# Where an SAE run's result lists its segment artifacts (both or neither):
# (written by services/sae/pipeline.py when the SAE's document codes are max-pooled over segments)
SEGMENT_CODES_ARTIFACT = "segment_codes"  # scipy.sparse CSR npz, float32 [segments, n_features]
SEGMENTS_ARTIFACT = "segments"  # npz: position, char_start, char_end, int [segments] each


class SearchNotReady(RuntimeError):
    """The SAE run has no codes yet (still training, or failed)."""

    def __init__(self, run: SaeRun) -> None:
        super().__init__(f"SAE run {run.id} is {run.status}: it has no codes to search yet")
        self.run_id, self.status = run.id, run.status


class _Cache:
    """A small LRU under a lock: codes by artifact URI, labels by (run id, fingerprint)."""

    def __init__(self, size: int) -> None:
        self.size, self.lock = size, threading.Lock()
        self.codes: OrderedDict[str, sp.csc_matrix] = OrderedDict()
        self.segments: OrderedDict[tuple[str, str], SegmentCodes] = OrderedDict()  # by (codes uri, index uri)
        self.spaces: dict[int, tuple[Any, tuple[int, ...], SearchSpace]] = {}  # run id -> (uris, fingerprint, space)

    def get_codes(self, store: ArtifactStore, uri: str) -> sp.csc_matrix:
        with self.lock:
            if uri in self.codes:
                self.codes.move_to_end(uri)
                return self.codes[uri]
        codes = sp.csc_matrix(sp.load_npz(io.BytesIO(store.read_bytes(uri))), dtype="float32")
        with self.lock:
            self.codes[uri] = codes
            while len(self.codes) > self.size:
                self.codes.popitem(last=False)
        return codes

    def get_segments(self, store: ArtifactStore, uris: tuple[str, str]) -> SegmentCodes:
        with self.lock:
            if uris in self.segments:
                self.segments.move_to_end(uris)
                return self.segments[uris]
        segments = read_segments(store, *uris)
        with self.lock:
            self.segments[uris] = segments
            while len(self.segments) > MAX_CACHED_SEGMENT_RUNS:
                self.segments.popitem(last=False)
        return segments

    def clear(self) -> None:
        with self.lock:
            self.codes.clear()
            self.segments.clear()
            self.spaces.clear()


_cache = _Cache(MAX_CACHED_RUNS)


def codes_uri(run: SaeRun) -> str:
    uri = ((run.result or {}).get("artifacts") or {}).get("codes_csc", {}).get("uri")
    if run.status != "succeeded" or not uri:
        raise SearchNotReady(run)
    return uri


def segment_uris(run: SaeRun) -> tuple[str, str] | None:
    """(segment codes URI, segment index URI) when the run's result lists both, else None."""
    artifacts = (run.result or {}).get("artifacts") or {}
    codes = (artifacts.get(SEGMENT_CODES_ARTIFACT) or {}).get("uri")
    index = (artifacts.get(SEGMENTS_ARTIFACT) or {}).get("uri")
    return (codes, index) if codes and index else None


def read_segments(store: ArtifactStore, codes_uri: str, index_uri: str) -> SegmentCodes:
    """The segment codes (stored CSR, read as CSC: SEGMENT(…) reads columns) with each segment's
    document position and character span."""
    codes = sp.csc_matrix(sp.load_npz(io.BytesIO(store.read_bytes(codes_uri))), dtype="float32")
    with np.load(io.BytesIO(store.read_bytes(index_uri)), allow_pickle=False) as index:
        spans = np.stack([index["char_start"], index["char_end"]], axis=1)  # [segments, 2]
        return SegmentCodes(codes, index["position"], spans)


def load_search_space(session: Session, store: ArtifactStore, sae_run: SaeRun) -> SearchSpace:
    """The run's codes with its current labels and families, and a loader of its segment codes
    when it has some; raises SearchNotReady. The same object is returned while none of them
    changes, so its label index is built once."""
    uris = (codes_uri(sae_run), segment_uris(sae_run))
    fingerprint = repo.labels_fingerprint(session, sae_run_id=sae_run.id)
    cached = _cache.spaces.get(sae_run.id)
    if cached is not None and cached[0] == uris and cached[1] == fingerprint:
        return cached[2]
    seg_uris = uris[1]
    space = SearchSpace(codes=_cache.get_codes(store, uris[0]), labels=repo.shown_labels(session, sae_run_id=sae_run.id),
                        families=repo.family_members_of_run(session, sae_run_id=sae_run.id),
                        thresholds=repo.shown_thresholds(session, sae_run_id=sae_run.id),
                        reliable=repo.reliable_features(session, sae_run_id=sae_run.id),
                        segments=None if seg_uris is None else lambda: _cache.get_segments(store, seg_uris))
    with _cache.lock:
        _cache.spaces[sae_run.id] = (uris, fingerprint, space)
    return space



def codes_or_none(session: Session, store: ArtifactStore, sae_run: SaeRun) -> sp.csc_matrix | None:
    """The run's codes (to count the notes a name selects), or None before it has any."""
    try:
        return load_search_space(session, store, sae_run).codes
    except SearchNotReady:
        return None


def clear_cache() -> None:
    """Forget every cached run (tests; after a run's codes are rewritten)."""
    _cache.clear()
