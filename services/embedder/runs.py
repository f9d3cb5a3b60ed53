"""Embedding runs: a dataset snapshot -> embedding shards in the artifact store, resumable.

Shard i is documents [i*S, (i+1)*S) and its batches depend only on its texts, so a run
killed at any point and started again reuses every finished shard, recomputes at most
the one that was in flight, and ends with the same vectors as an uninterrupted run. For the
same reason several workers can share a run shard by shard (`claim`, see the worker).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable

from artifacts import ArtifactStore
from contracts.embed import EmbedJobPayload, EmbedJobResult
from contracts.jobs import Progress
from services.embedder.config import EmbedderSettings
from services.embedder.distinct import SegmentCache
from services.embedder.encoder import configure_threads, default_batch_tokens
from services.embedder.errors import EmptyDatasetError, RunCancelledError, RunSpecMismatchError
from services.embedder.models import LoadedModel, ModelCache
from services.embedder.segments import embed_documents
from services.embedder.shards import (
    ShardStats,
    iter_snapshot_shards,
    read_shard_stats,
    snapshot_rows,
    write_shard,
)

log = logging.getLogger(__name__)


class ProgressReporter:
    """Documents done, rate over the documents computed here (not reused), ETA; throttled."""

    def __init__(self, total: int, callback: Callable[[Progress], None] | None, interval_s: float) -> None:
        self.total, self.callback, self.interval_s = total, callback, interval_s
        self.started = time.perf_counter()
        self.reused = 0
        self._last = -math.inf

    def update(self, done: int, message: str, *, force: bool = False) -> None:
        now = time.perf_counter()
        if self.callback is None or (not force and now - self._last < self.interval_s):
            return
        self._last = now
        computed = done - self.reused
        rate = computed / (now - self.started) if computed > 0 else None
        eta = (self.total - done) / rate if rate else None
        self.callback(Progress(done=done, total=self.total, unit="documents", rate=rate,
                               eta_seconds=eta, message=message))


def run_embedding(
    payload: EmbedJobPayload,
    store: ArtifactStore,
    *,
    settings: EmbedderSettings,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    models: ModelCache | None = None,
    claim: Callable[[int], bool] | None = None,
    wait_for_others: bool = True,
) -> EmbedJobResult | None:
    """Embed every document of the snapshot into `{artifact_prefix}/...` shards, resuming if possible.

    Several workers may share a run: `claim(i)` says whether this one may compute shard i (no
    other holds it); shards held elsewhere are waited for (`wait_for_others`) or left to their
    holder (a helper then returns None instead of the run's result).

    Raises `UnknownModelError` (names the model), `EmptyDatasetError`, `RunSpecMismatchError`
    (the prefix holds shards of another spec), `RunCancelledError` (`should_stop()` said so).
    """
    spec = payload.spec
    configure_threads(settings.threads)
    models = models or ModelCache.from_settings(settings)
    lm = models.get(spec.model, max_length=spec.max_length, prompt_name=spec.prompt_name, precision=spec.precision)
    n_docs = snapshot_rows(store, payload.snapshot_uri)
    if n_docs == 0:
        raise EmptyDatasetError(f"dataset snapshot {payload.snapshot_uri!r} has no documents")
    check_or_write_manifest(store, payload, lm)
    n_shards = math.ceil(n_docs / spec.shard_size)
    work = ShardWork(payload, store, settings, lm, n_docs, on_progress, should_stop, claim)
    work.reporter.update(0, f"starting: {n_docs} documents in {n_shards} shards", force=True)
    while True:
        work.one_pass()
        if len(work.stats) == n_shards:
            break
        if not wait_for_others:
            return None
        time.sleep(settings.claim_poll_s)  # the other workers' shards are still being computed
    return build_result(payload, lm, [work.stats[i] for i in range(n_shards)], n_docs=n_docs,
                        seconds=time.perf_counter() - work.started, computed_docs=work.computed_docs,
                        computed_tokens=work.computed_tokens, shards_computed=work.shards_computed,
                        segments=(work.segments_computed, work.segments_embedded))


class ShardWork:
    """One invocation's walk over a run's shards: reuse complete ones, compute claimable ones."""

    def __init__(self, payload: EmbedJobPayload, store: ArtifactStore, settings: EmbedderSettings,
                 lm: LoadedModel, n_docs: int, on_progress: Callable[[Progress], None] | None,
                 should_stop: Callable[[], bool] | None, claim: Callable[[int], bool] | None) -> None:
        self.payload, self.store, self.settings, self.lm = payload, store, settings, lm
        self.prefix = payload.artifact_prefix.rstrip("/")
        self.n_shards = math.ceil(n_docs / payload.spec.shard_size)
        self.should_stop, self.claim = should_stop, claim
        self.reporter = ProgressReporter(n_docs, on_progress, settings.progress_interval_s)
        self.batch_tokens = payload.spec.batch_tokens or settings.batch_tokens or default_batch_tokens(lm.device)
        self.stats: dict[int, ShardStats] = {}
        self.docs_done = self.computed_docs = self.computed_tokens = self.shards_computed = 0
        self.segment_cache = SegmentCache()  # across this invocation's shards
        self.segments_computed = self.segments_embedded = 0
        self.started = time.perf_counter()

    def one_pass(self) -> None:
        """Every shard not yet known: reuse it if complete, else compute it if this worker may."""
        spec = self.payload.spec
        for index, (first, texts) in enumerate(iter_snapshot_shards(self.store, self.payload.snapshot_uri,
                                                                    spec.shard_size)):
            if index in self.stats:
                continue
            if self.should_stop is not None and self.should_stop():
                raise RunCancelledError(f"run {self.payload.run_id} stopped before shard {index}")
            shard = read_shard_stats(self.store, self.prefix, index, first_position=first, n_docs=len(texts),
                                     dim=self.lm.dim, n_special=self.lm.n_special, segments=spec.segments)
            if shard is not None:
                self.reporter.reused += len(texts)
            elif self.claim is None or self.claim(index):
                shard = self._compute(index, first, texts)
            else:
                continue  # another worker holds it
            self.stats[index] = shard
            self.docs_done += len(texts)
            self.reporter.update(self.docs_done, f"shard {index + 1}/{self.n_shards} done", force=True)

    def _compute(self, index: int, first: int, texts: list[str]) -> ShardStats:
        done_before = self.docs_done

        def on_tokens(done: int, total: int) -> None:
            self.reporter.update(done_before + len(texts) * done // max(total, 1),
                                 f"shard {index + 1}/{self.n_shards}")

        spec = self.payload.spec
        kw = {"pooling": spec.pooling, "normalize": spec.normalize, "batch_tokens": self.batch_tokens,
              "max_batch_size": self.settings.max_batch_size, "should_stop": self.should_stop,
              "pad_multiple": spec.pad_multiple}
        embedded, segments = embed_documents(self.lm, texts, segments=spec.segments, unit=spec.segment_unit,
                                             documents=spec.document_vectors, cache=self.segment_cache,
                                             on_tokens=on_tokens, word_states=bool(spec.word_states), **kw)
        if segments is not None:
            self.segments_computed += len(segments.doc)
            self.segments_embedded += segments.n_embedded
        shard = write_shard(self.store, self.prefix, index, first, embedded, segments)
        log.info("embedding run %s: shard %d computed", self.payload.run_id, index)
        self.computed_docs += len(texts)
        self.computed_tokens += shard.n_tokens
        self.shards_computed += 1
        return shard


def check_or_write_manifest(store: ArtifactStore, payload: EmbedJobPayload, lm: LoadedModel) -> None:
    """`{prefix}/spec.json` records what the shards are; a resumed run must match it."""
    key = f"{payload.artifact_prefix.rstrip('/')}/spec.json"
    manifest = {
        "snapshot_uri": payload.snapshot_uri, "model": payload.spec.model, "pooling": payload.spec.pooling,
        "normalize": payload.spec.normalize, "max_length": lm.max_length,
        "shard_size": payload.spec.shard_size, "dim": lm.dim,
    }
    if payload.spec.segments:  # only then: manifests of runs without segments stay as they were
        manifest |= {"segments": True, "segment_unit": payload.spec.segment_unit}
    if payload.spec.word_states:  # likewise for runs without words
        manifest["word_states"] = True
    if payload.spec.document_vectors != "encoded":  # likewise: older manifests stay as they were
        manifest["document_vectors"] = payload.spec.document_vectors
    if payload.spec.precision is not None:  # a run's own precision: its resumed shards must share it
        manifest |= {"precision": lm.precision}
        if lm.int8:  # CTranslate2's int8 and torch's give slightly different vectors
            manifest |= {"int8_engine": lm.engine}
    if lm.prompt_text:  # likewise for models without prompts
        manifest |= {"prompt": lm.prompt_text}
    if lm.provenance:  # a resumed run must use the very same file (its SHA-256)
        manifest |= {"model_provenance": lm.provenance}
    if store.exists(key):
        found = json.loads(store.read_bytes(key))
        if found != manifest:
            raise RunSpecMismatchError(
                f"{key} was written for {found}, not {manifest}: use a new artifact prefix for a new spec"
            )
        return
    store.write_bytes(key, json.dumps(manifest, sort_keys=True).encode(), kind="embedding-spec")


def build_result(
    payload: EmbedJobPayload, lm: LoadedModel, stats: list[ShardStats], *, n_docs: int, seconds: float,
    computed_docs: int, computed_tokens: int, shards_computed: int, segments: tuple[int, int] = (0, 0),
) -> EmbedJobResult:
    """`segments`: (segments of the shards computed here, the distinct ones the model embedded)."""
    histogram: Counter[int] = Counter()
    for shard in stats:
        histogram.update(shard.n_chunks.tolist())
    return EmbedJobResult(
        model=payload.spec.model, model_path=lm.path, dim=lm.dim, max_length=lm.max_length,
        device=str(lm.device), precision=lm.precision, engine=lm.engine, n_documents=n_docs,
        prompt=lm.prompt_text, model_provenance=lm.provenance,
        n_chunks=int(sum(int(s.n_chunks.sum()) for s in stats)), n_tokens=sum(s.n_tokens for s in stats),
        shards=[s.embeddings for s in stats], chunks=[s.chunks for s in stats],
        segments=[s.segments for s in stats if s.segments is not None],
        n_segments=sum(s.n_segments for s in stats), seconds=seconds,
        segment_unit=payload.spec.segment_unit if payload.spec.segments else None,
        docs_per_s=computed_docs / seconds if seconds > 0 else 0.0,
        tokens_per_s=computed_tokens / seconds if seconds > 0 else 0.0,
        chunks_per_doc_histogram={str(k): v for k, v in sorted(histogram.items())},
        shards_computed=shards_computed, shards_reused=len(stats) - shards_computed,
        n_segments_computed=segments[0], n_segments_embedded=segments[1],
    )
