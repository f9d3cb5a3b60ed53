"""The `interpret_run` job without the queue: name every feature of an SAE run, resumably.

Features are named in the order a person browses them (densest first, `naming_order`), up to
`limit` of them (the rest on demand), in batches of `batch_features`; each finished batch is one JSONL shard
(`interpretations/shard-00000.jsonl`, written atomically), so a killed worker loses at most
the batch in flight and a retried job skips every shard it finds. Evidence draws depend only
on (seed, feature), so a resumed run shows the back-ends what an uninterrupted run would.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from artifacts import ArtifactStore
from artifacts.heap import trim_heap
from contracts.artifacts import ArtifactInfo
from contracts.interpret import BackendOptions, FeatureInterpretations, InterpretRunPayload, InterpretRunResult
from contracts.jobs import Progress
from services.interpreter.backends import build_backend
from services.interpreter.backends.base import Backend, FamilyNamer
from services.interpreter.backends.keywords import KeywordsBackend
from services.interpreter.config import InterpreterSettings
from services.interpreter.corpus import Corpus, load_corpus
from services.interpreter.families import name_families
from services.interpreter.naming import Namer, naming_order
from services.interpreter.phrases import PhraseBackend
from services.interpreter.scoring import EmbedFn

ProgressFn = Callable[[Progress], None]
StopFn = Callable[[], bool]


class InterpretRunStopped(RuntimeError):
    """should_stop() said so; the finished shards stay, a retried job resumes after them."""


def shard_key(prefix: str, index: int) -> str:
    return f"{prefix}/interpretations/shard-{index:05d}.jsonl"


def read_shard(store: ArtifactStore, key: str) -> tuple[list[FeatureInterpretations], ArtifactInfo]:
    data = store.read_bytes(key)
    info = ArtifactInfo(uri=store.uri(key), size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                        kind="interpretations")
    records = [FeatureInterpretations.model_validate_json(line) for line in data.decode().splitlines() if line.strip()]
    return records, info


def _best_label(record: FeatureInterpretations) -> str | None:
    return record.interpretations[record.best].label if record.best is not None else None


PREPARE_BATCHES = 8
"""Batches whose evidence and candidates are drawn together ahead of naming them (Namer.prepare), their
candidates embedded in one call on a thread while the group before is named: a group is prepared while the
one before it is named (keywords back-ends only)."""
AHEAD_GROUPS = 2
"""Groups prepared beyond the one being named: with a child process drawing them (Namer.ahead_process), it starts
the second one while the parent takes the first back, instead of waiting for the next batch to be asked."""
POOL = 256
"""Best labels of the latest features named that a batch draws its random-label controls from."""


@dataclass
class _Tally:
    """What a run keeps of the features named so far: counts and sums for its result, the latest
    POOL best labels (controls) and, when it names families, every feature's best label; never the
    records themselves (evidence ids of several interpretations: kept, they grew the run by about
    16 MB per 1,000 features, `bench/naming_memory.py`)."""

    keep_labels: bool
    n_records: int = 0
    n_named: int = 0
    score_sum: float = 0.0
    n_scores: int = 0
    n_flagged: int = 0
    n_unreliable: int = 0
    recent: deque[str | None] = field(default_factory=lambda: deque(maxlen=POOL))
    labels: dict[int, str] = field(default_factory=dict)

    def add(self, records: list[FeatureInterpretations]) -> None:
        for r in records:
            self.n_records += 1
            label = _best_label(r)
            self.recent.append(label)
            if r.best is None:
                continue
            best = r.interpretations[r.best]
            self.n_named += 1
            if best.score is not None:
                self.score_sum += best.score
                self.n_scores += 1
            if best.reliable is not None:
                self.n_flagged += 1
                self.n_unreliable += not best.reliable
            if self.keep_labels and label:
                self.labels[r.feature] = label

    def pool(self) -> list[str]:
        """The control pool: best labels of the latest POOL features named (none for a skipped one)."""
        return [lab for lab in self.recent if lab]


async def name_run(payload: InterpretRunPayload, store: ArtifactStore, *, settings: InterpreterSettings,
                   embed_texts: EmbedFn | None, corpus: Corpus | None = None,
                   backends: list[Backend] | None = None, on_progress: ProgressFn | None = None,
                   should_stop: StopFn | None = None) -> InterpretRunResult:
    """Name the payload's features; returns the stored result when the run had finished before.
    Memory is that of one batch: each batch's records go to their shard and into a `_Tally`."""
    prefix = payload.artifact_prefix.rstrip("/")
    if store.exists(f"{prefix}/result.json"):
        return InterpretRunResult.model_validate_json(store.read_bytes(f"{prefix}/result.json"))
    corpus = corpus or load_corpus(store, payload.corpus)
    built = backends or [build_backend(o, settings) for o in payload.backends]
    judge = next((b for b in built if b.name != "keywords"), None)
    named_by = list(zip(payload.backends, built))
    if payload.keywords_fallback and all(b.name != "keywords" for b in built):
        named_by.append((BackendOptions(backend="keywords"), PhraseBackend()))
    namer = Namer(corpus, named_by, embed_texts, payload.evidence, payload.scoring, judge=judge,
                  ahead_process=settings.ahead_process)
    features = payload.features if payload.features is not None else naming_order(corpus, payload.order)
    features = features[: payload.limit] if payload.limit is not None else features
    batches = [features[i:i + payload.batch_features] for i in range(0, len(features), payload.batch_features)]
    started, named_now, resumed = time.perf_counter(), 0, 0
    shards: list[ArtifactInfo] = []
    tally = _Tally(keep_labels=bool(payload.families))
    # a language model names a feature in seconds: a group of its features prepared at once would hold back
    # the run's progress and its cancelling for minutes, so only the keywords back-ends' batches are prepared
    prepared = 0 if all(isinstance(b, KeywordsBackend) for _, b in named_by) else len(batches)
    try:
        for index, batch in enumerate(batches):
            key = shard_key(prefix, index)
            if store.exists(key):
                found, info = read_shard(store, key)
                resumed += 1
            else:
                if should_stop is not None and should_stop():
                    raise InterpretRunStopped(f"run {payload.run_id} stopped before batch {index}")
                while prepared < min(index + (1 + AHEAD_GROUPS) * PREPARE_BATCHES, len(batches)):  # this one, those ahead
                    group = range(prepared, min(prepared + PREPARE_BATCHES, len(batches)))
                    await namer.prepare([f for i in group if not store.exists(shard_key(prefix, i)) for f in batches[i]])
                    prepared = group.stop
                found = await namer.name_features(batch, tally.pool())
                data = "".join(r.model_dump_json() + "\n" for r in found).encode()
                info = store.write_bytes(key, data, kind="interpretations")
                named_now += len(batch)
                trim_heap()  # a batch's temporaries ([64, N] similarities, label vectors) stay in glibc's arenas otherwise
            shards.append(info)
            tally.add(found)
            if on_progress is not None:
                elapsed = time.perf_counter() - started
                rate = named_now / elapsed if named_now and elapsed > 0 else None
                done = sum(len(b) for b in batches[: index + 1])
                on_progress(Progress(done=done, total=len(features), unit="features", rate=rate,
                                     eta_seconds=(len(features) - done) / rate if rate else None,
                                     message=f"batch {index + 1}/{len(batches)}"))
    finally:
        namer.close()  # the child drawing groups ahead, if any
    families = None
    if payload.families:
        namer_backend = built[0]
        if isinstance(namer_backend, FamilyNamer):
            fams = await name_families(payload.families, tally.labels, namer_backend, backend=namer_backend)
            families = store.write_bytes(f"{prefix}/families.json",
                                         json.dumps([f.model_dump(mode="json") for f in fams]).encode(),
                                         kind="interpretation-families")
    seconds = time.perf_counter() - started
    result = InterpretRunResult(
        run_id=payload.run_id, n_features=len(features), n_named=tally.n_named,
        n_skipped=tally.n_records - tally.n_named, shards=shards, families=families, seconds=seconds,
        features_per_min=60.0 * named_now / seconds if seconds > 0 else 0.0,
        mean_score=tally.score_sum / tally.n_scores if tally.n_scores else None,
        unreliable_fraction=tally.n_unreliable / tally.n_flagged if tally.n_flagged else None,
        resumed_batches=resumed,
    )
    store.write_bytes(f"{prefix}/result.json", result.model_dump_json().encode(), kind="interpretation-result")
    return result
