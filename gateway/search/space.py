"""The search space of an SAE run: its codes (CSC, read once per process) with its shown labels
and families (from the database, re-read only when they change)."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict

import scipy.sparse as sp
from sqlalchemy.orm import Session

from artifacts import ArtifactStore
from gateway.domain.runs.models import SaeRun
from gateway.search import repo
from gateway.search.expressions import SearchSpace

MAX_CACHED_RUNS = 4  # 200,000 documents × k=32 is ~50 MB of CSC per run


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
        self.spaces: dict[int, tuple[str, tuple[int, ...], SearchSpace]] = {}  # run id -> (uri, fingerprint, space)

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

    def clear(self) -> None:
        with self.lock:
            self.codes.clear()
            self.spaces.clear()


_cache = _Cache(MAX_CACHED_RUNS)


def codes_uri(run: SaeRun) -> str:
    uri = ((run.result or {}).get("artifacts") or {}).get("codes_csc", {}).get("uri")
    if run.status != "succeeded" or not uri:
        raise SearchNotReady(run)
    return uri


def load_search_space(session: Session, store: ArtifactStore, sae_run: SaeRun) -> SearchSpace:
    """The run's codes with its current labels and families; raises SearchNotReady. The same
    object is returned while neither changes, so its label index is built once."""
    uri = codes_uri(sae_run)
    fingerprint = repo.labels_fingerprint(session, sae_run_id=sae_run.id)
    cached = _cache.spaces.get(sae_run.id)
    if cached is not None and cached[0] == uri and cached[1] == fingerprint:
        return cached[2]
    space = SearchSpace(codes=_cache.get_codes(store, uri), labels=repo.shown_labels(session, sae_run_id=sae_run.id),
                        families=repo.family_members_of_run(session, sae_run_id=sae_run.id))
    with _cache.lock:
        _cache.spaces[sae_run.id] = (uri, fingerprint, space)
    return space


def clear_cache() -> None:
    """Forget every cached run (tests; after a run's codes are rewritten)."""
    _cache.clear()
