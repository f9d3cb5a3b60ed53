"""Embedding runs: a dataset snapshot -> embedding shards in the artifact store, resumable.

Shard i is documents [i*S, (i+1)*S) and its batches depend only on its texts, so a run
killed at any point and started again reuses every finished shard, recomputes at most
the one that was in flight, and ends with the same vectors as an uninterrupted run.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable

from artifacts import ArtifactStore
from contracts.embed import EmbedJobPayload, EmbedJobResult
from contracts.jobs import Progress
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import configure_threads, default_batch_tokens, embed_texts
from services.embedder.errors import EmptyDatasetError, RunCancelledError, RunSpecMismatchError
from services.embedder.models import LoadedModel, ModelCache
from services.embedder.shards import (
    ShardStats,
    iter_snapshot_shards,
    read_shard_stats,
    snapshot_rows,
    write_shard,
)


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
) -> EmbedJobResult:
    """Embed every document of the snapshot into `{artifact_prefix}/...` shards, resuming if possible.

    Raises `UnknownModelError` (names the model), `EmptyDatasetError`, `RunSpecMismatchError`
    (the prefix holds shards of another spec), `RunCancelledError` (`should_stop()` said so).
    """
    spec, prefix = payload.spec, payload.artifact_prefix.rstrip("/")
    configure_threads(settings.threads)
    models = models or ModelCache(device=settings.device, precision=settings.precision,
                                  default_model=settings.default_model)
    lm = models.get(spec.model, max_length=spec.max_length)
    n_docs = snapshot_rows(store, payload.snapshot_uri)
    if n_docs == 0:
        raise EmptyDatasetError(f"dataset snapshot {payload.snapshot_uri!r} has no documents")
    check_or_write_manifest(store, payload, lm)
    n_shards = math.ceil(n_docs / spec.shard_size)
    batch_tokens = spec.batch_tokens or settings.batch_tokens or default_batch_tokens(lm.device)
    reporter = ProgressReporter(n_docs, on_progress, settings.progress_interval_s)
    reporter.update(0, f"starting: {n_docs} documents in {n_shards} shards", force=True)
    stats: list[ShardStats] = []
    computed_docs = computed_tokens = shards_computed = 0
    started = time.perf_counter()
    for index, (first, texts) in enumerate(iter_snapshot_shards(store, payload.snapshot_uri, spec.shard_size)):
        if should_stop is not None and should_stop():
            raise RunCancelledError(f"run {payload.run_id} stopped before shard {index}")
        shard = read_shard_stats(store, prefix, index, first_position=first, n_docs=len(texts),
                                 dim=lm.dim, n_special=lm.n_special)
        if shard is not None:
            reporter.reused += len(texts)
        else:
            def on_tokens(done: int, total: int, first: int = first, n: int = len(texts), i: int = index) -> None:
                reporter.update(first + n * done // max(total, 1), f"shard {i + 1}/{n_shards}")

            embedded = embed_texts(
                lm, texts, pooling=spec.pooling, normalize=spec.normalize, batch_tokens=batch_tokens,
                max_batch_size=settings.max_batch_size, on_tokens=on_tokens, should_stop=should_stop,
            )
            shard = write_shard(store, prefix, index, first, embedded)
            computed_docs += len(texts)
            computed_tokens += shard.n_tokens
            shards_computed += 1
        stats.append(shard)
        reporter.update(first + len(texts), f"shard {index + 1}/{n_shards} done", force=True)
    return build_result(payload, lm, stats, n_docs=n_docs, seconds=time.perf_counter() - started,
                        computed_docs=computed_docs, computed_tokens=computed_tokens,
                        shards_computed=shards_computed)


def check_or_write_manifest(store: ArtifactStore, payload: EmbedJobPayload, lm: LoadedModel) -> None:
    """`{prefix}/spec.json` records what the shards are; a resumed run must match it."""
    key = f"{payload.artifact_prefix.rstrip('/')}/spec.json"
    manifest = {
        "snapshot_uri": payload.snapshot_uri, "model": payload.spec.model, "pooling": payload.spec.pooling,
        "normalize": payload.spec.normalize, "max_length": lm.max_length,
        "shard_size": payload.spec.shard_size, "dim": lm.dim,
    }
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
    computed_docs: int, computed_tokens: int, shards_computed: int,
) -> EmbedJobResult:
    histogram: Counter[int] = Counter()
    for shard in stats:
        histogram.update(shard.n_chunks.tolist())
    return EmbedJobResult(
        model=payload.spec.model, model_path=lm.path, dim=lm.dim, max_length=lm.max_length,
        device=str(lm.device), precision=lm.precision, n_documents=n_docs,
        n_chunks=int(sum(int(s.n_chunks.sum()) for s in stats)), n_tokens=sum(s.n_tokens for s in stats),
        shards=[s.embeddings for s in stats], chunks=[s.chunks for s in stats], seconds=seconds,
        docs_per_s=computed_docs / seconds if seconds > 0 else 0.0,
        tokens_per_s=computed_tokens / seconds if seconds > 0 else 0.0,
        chunks_per_doc_histogram={str(k): v for k, v in sorted(histogram.items())},
        shards_computed=shards_computed, shards_reused=len(stats) - shards_computed,
    )
