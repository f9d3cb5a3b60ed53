"""expression_scoped of bench/status.py: features named on segments, then an expression written as a user would.

1. Every feature that fires on a segment is named by the keywords back-end on the segment corpus (what the
   naming job does for a run with segment codes: phrase names against near misses, a calibrated threshold
   each), then one meaning per name across the run (gateway/domain/features/names.py, what recording does).
2. The user types words into the product's label search (gateway/search/label_rank.py: the ranking and
   matching the API's label search and the search box's completion use): the topic word, and each cue word
   that the regex_cues user wrote (USER_WORDS), as that user wrote it: NegEx's triggers are whole words
   (regex_cues matches them between word boundaries), so they are typed in quotes, which the label search reads
   as whole words (`"no"` finds "no rash", not "normal"); the demo's are stems, typed bare (`sospett` begins
   "sospetta"). From what each search returns, the reliable names are taken,
   a topic name that also holds a cue word being a cue; the expression is
   `SEGMENT((label:"<topic>" OR …) AND NOT (label:"<cue>" OR …))`, evaluated by Prisma's evaluator, where a
   bare label:"…" means above that name's threshold. No feature index, no class label is used.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from typing import Any

import numpy as np

# the words a user starts from: the topic; the cue words of regex_cues, as written there
USER_WORDS = {"demo": (("bronchiolit",), ("sospett", "?", "esclus", "possibil", "probabil", "pregress")),
              "negex": ((), ("no", "not", "denies", "denied", "without", "negative", "free", "ruled", "absence",
                             "absent", "resolved", "declined", "neither", "nor", "unlikely"))}
WHOLE_WORDS = {"demo": False, "negex": True}
"""Whether the set's USER_WORDS are whole words (typed in quotes) or stems (typed bare)."""
SEARCH_LIMIT = 20
"""Results of one label search a user reads (the product's page size)."""


class Names(dict):
    """Feature → shown name, as a run shows them after one meaning per name; with each name's threshold,
    reliability and the label-search entries."""

    def __init__(self, labels: dict[int, str], thresholds: dict[int, float], reliable: set[int], entries: list) -> None:
        super().__init__(labels)
        self.thresholds, self.reliable, self.entries = thresholds, reliable, entries


def name_on_segments(ds: Any, seg: Any, segment_codes: Any) -> tuple[Names, dict]:
    """Every feature that fires on a segment, named by the keywords back-end on the segment corpus, one meaning
    per name across them; (names, timing and counts)."""
    import torch
    from interpret import label_embedder
    from status_core import MODEL_NAME

    threads = torch.get_num_threads()  # label_embedder sets torch's threads to 1 for the process: given back below
    try:
        return _name_on_segments(ds, seg, segment_codes, label_embedder(1, MODEL_NAME[0]))
    finally:  # the SAEs trained after this (status.py's sensitivity variants) on the threads the run asked for:
        torch.set_num_threads(threads)  # a thread count changes an SAE's rounding, so its figures


def _name_on_segments(ds: Any, seg: Any, segment_codes: Any, embed_texts: Any) -> tuple[Names, dict]:
    import pyarrow as pa

    from contracts.interpret import BackendOptions
    from gateway.domain.features.names import NameChoice, distinct_names, shared_fraction
    from gateway.search.label_rank import LabelEntry
    from services.interpreter.backends import build_backend
    from services.interpreter.config import InterpreterSettings
    from services.interpreter.corpus import segment_corpus
    from services.interpreter.naming import Namer

    table = pa.table({"position": np.arange(len(ds.texts)), "doc_id": np.arange(len(ds.texts)), "text": ds.texts})
    shard = {"vectors": seg.vectors, "position": seg.position, "char_start": seg.char_start, "char_end": seg.char_end}
    corpus = segment_corpus(table, [shard], segment_codes.tocsr())
    opts = BackendOptions(backend="keywords")
    namer = Namer(corpus=corpus, backends=[(opts, build_backend(opts, InterpreterSettings()))], embed_texts=embed_texts)
    features = [int(f) for f in np.flatnonzero(corpus.codes.getnnz(axis=0) > 0)]
    t0, records = time.perf_counter(), []
    for i in range(0, len(features), 256):
        pool = [r.interpretations[r.best].label for r in records[-256:] if r.best is not None]
        records += asyncio.run(namer.name_features(features[i:i + 256], pool))
    best = {r.feature: r.interpretations[r.best] for r in records if r.best is not None}
    before = shared_fraction({f: b.label for f, b in best.items()}, {f for f, b in best.items() if b.reliable})
    changes = distinct_names([NameChoice(f, b.label, b.score, b.reliable, b.threshold,
                                         [a.model_dump() for a in b.alternatives], b.holds_on) for f, b in best.items()])
    shown = {f: (b.label, b.score, b.threshold, b.reliable, b.description) for f, b in best.items()}
    for f, alt in changes.items():
        label, _, _, _, description = shown[f]
        shown[f] = ((label, shown[f][1], shown[f][2], False, description) if alt is None
                    else (alt["label"], alt["score"], alt["threshold"], alt["reliable"], description))
    labels = {f: v[0] for f, v in shown.items()}
    reliable = {f for f, v in shown.items() if v[3]}
    entries = [LabelEntry(f, v[0], v[4], v[1], v[3], v[2]) for f, v in shown.items()]
    names = Names(labels, {f: v[2] for f, v in shown.items() if v[2] is not None}, reliable, entries)
    skipped = [r.skipped for r in records if r.best is None]
    seconds = round(time.perf_counter() - t0, 1)  # naming and one meaning per name; not the check below
    truth = threshold_truth(corpus, names, namer.language)
    return names, {"features_named": len(labels), "naming_seconds": seconds,
                   "reliable": len(reliable), "with_threshold": len(names.thresholds),
                   "shared_name_fraction_before": round(before, 4),
                   "shared_name_fraction": round(shared_fraction(labels, reliable), 4),
                   "renamed": sum(a is not None for a in changes.values()),
                   "skipped": len(skipped), "skip_reasons": skip_reasons(skipped),
                   "threshold_precision_in_corpus": truth}


def threshold_truth(corpus: Any, names: Names, language: str) -> dict:
    """What each threshold promises, checked on the whole corpus: for every reliable shown name with a threshold,
    the share of the corpus's segments at or above it where the name holds (every segment, not the calibration
    sample; a segment's text stemmed once). The promise is 0.8; the calibration estimates it from a sample."""
    from services.interpreter.phrases import holds_mask, word_stems

    cache: dict[str, frozenset[str]] = {}

    def stems(p: int) -> frozenset[str]:
        text = corpus.text(int(p))
        if text not in cache:
            cache[text] = word_stems(text, language)
        return cache[text]

    shares = []
    for f in sorted(names.reliable):
        t = names.thresholds.get(f)
        if t is None:
            continue
        active, acts = corpus.column(f)
        above = active[acts >= t]
        if len(above):
            shares.append(float(holds_mask(names[f], [stems(p) for p in above], language).mean()))
    arr = np.asarray(shares)
    if not len(arr):
        return {"names": 0}
    return {"names": len(arr), "median": round(float(np.median(arr)), 4), "p10": round(float(np.quantile(arr, 0.1)), 4),
            "min": round(float(arr.min()), 4), "below_0_8": int((arr < 0.8).sum()), "below_0_7": int((arr < 0.7).sum()),
            "below_0_5": int((arr < 0.5).sum())}


def skip_reasons(skipped: list[str | None]) -> dict[str, int]:
    """How many features each reason left unnamed, its numbers written N ("feature N fires on N documents (< N)",
    "no name: keywords: no phrase separates …"), most frequent first."""
    counts = Counter(re.sub(r"\d+", "N", reason or "no reason")[:160] for reason in skipped)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10])


def user_expression(names: Names, topic: tuple[str, ...], cues: tuple[str, ...],
                    codes: Any = None, whole_words: bool = False) -> tuple[str, dict]:
    """The expression a user writes from the label searches (see the module's docstring): the product's own
    `expression_from_names`, which the demo's expression concept is written with too."""
    from gateway.search.label_rank import expression_from_names, search_names

    def found(word: str) -> list[tuple[str, int | None]]:
        hits = search_names(f'"{word}"' if whole_words else word, names.entries, codes, SEARCH_LIMIT)
        return [(e.label, n) for e, n in hits if e.reliable]

    searched = {w: found(w) for w in (*topic, *cues)}
    expression, topic_names, cue_names = expression_from_names(
        {w: [lab for lab, _ in hits] for w, hits in searched.items()}, topic, cues)
    return expression, {"searches": {w: [{"label": lab, "notes": n} for lab, n in hits] for w, hits in searched.items()},
                        "topic_names": topic_names, "cue_names": cue_names}


def run_expression(ds: Any, split: Any, seg: Any, pooled: Any, out: dict) -> dict | None:
    from status_core import stage

    with stage(out, "name_segments"):
        names, out["naming"] = name_on_segments(ds, seg, pooled.segments)
    topic, cues = USER_WORDS[ds.name]
    expression, chosen = user_expression(names, topic, cues, pooled.documents.tocsc(), WHOLE_WORDS[ds.name])
    with stage(out, "expression_scoped"):
        scored = score_expression(ds, split, seg, pooled.segments, pooled.documents, names, expression)
    out["expression_scoped"] = {"expression": expression, **chosen}
    return scored


def score_expression(ds: Any, split: Any, seg: Any, segment_codes: Any, document_codes: Any,
                     labels: dict[int, str], expression: str) -> dict:
    """The expression evaluated by Prisma's evaluator over these codes (SEGMENT(…) on `seg`'s rows), scored on
    the held-out rows; with `Names`, label:"…" reads their thresholds and reliability as a run's search does."""
    from status_core import PREDICTED

    from gateway.domain.concepts.probe import binary_metrics
    from gateway.search.expressions import SearchSpace, SegmentCodes, evaluate

    spans = np.stack([seg.char_start, seg.char_end], axis=1)
    extra = {"thresholds": labels.thresholds, "reliable": labels.reliable} if isinstance(labels, Names) else {}
    space = SearchSpace(document_codes.tocsc(), labels, {}, SegmentCodes(segment_codes, seg.position, spans), **extra)
    match = evaluate(expression, space)
    pred = match.mask[split.test].astype(np.int64)
    return binary_metrics(ds.y[split.test], pred) | {PREDICTED: pred}  # for status.py's `comparisons`
