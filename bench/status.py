"""Status benchmark → bench/results/status.json: can Prisma tell a *confirmed* mention from a
suspected or negated one (issue #16)?

Two sets (bench/status_data.py), each with one fixed stratified split (25 % held out, seed 0):
  - demo: 2,000 generated Italian notes (seed 0), positive = label `bronchiolitis:confirmed`;
  - negex: 2,376 English condition mentions, positive = Affirmed (negative = Negated); the text
    is the sentence with the mention wrapped in [ ], the same for every method.
Methods, each scored on the held-out rows (precision, recall, F1 of the positive class):
  - regex: the naive pattern (demo: `bronchiolit`; negex: every named condition is affirmed);
  - regex_cues: cue words near the mention (demo: the issue's Italian hedges; negex: the classic
    NegEx triggers, pre and post, with pseudo-triggers and termination words);
  - tfidf_lr: word 1-2-gram TF-IDF (tokens also `[`, `]` and `?`, so the mention's marker and the
    question mark are words) + L2 logistic regression, C by stratified 5-fold CV on F1 (training rows);
  - dense_lr: the document vector of Prisma's embedder (chunk-and-average all-MiniLM-L6-v2, mean
    pooling, unit norm) + the same logistic regression;
  - probe_documents: Prisma's SAE (its trainer: expansion 8, k 32, 2,000 steps) trained on the
    training rows' document vectors, every document encoded, Prisma's probe
    (its readout, `gateway.domain.concepts.readout.fit_readout`: row-L2 + L2 or raw codes + L1, and C, chosen by
    CV on the training rows; each probe's `l1` beside it: the L1 probe alone, the default before) on the codes;
  - probe_segments: every text cut by Prisma's segmenter (services/embedder/segments.py, its default
    unit: clauses) and each segment embedded as an embedding run with `segments` does; the SAE (same
    settings) trained on the training rows' segment and document vectors
    (services.sae.segments.training_vectors); a document's codes = the row-wise max of its segments'
    codes (pooled_codes); Prisma's probe on them. `probe_segments_by_unit` has the same with
    sentences as the unit beside it;
  - expression_scoped: the features named on segments by Prisma's keywords back-end (phrase names,
    one meaning per name, a threshold each: bench/status_expression.py), then a scoped expression
    written as a user would, from what the product's label search returns for the words typed;
  - probe_tokens (measured for item 3, not a product path): an SAE (same settings, 2,000 steps) on
    the last hidden state of every content token of every sentence (each sentence through the model
    on its own; unit norm; the training rows' tokens), every token encoded, max-pooled to sentences
    and then to documents, Prisma's probe on the documents' codes;
  - tfidf_anchored and probe_anchored: only the segments whose text names the topic (demo:
    `bronchiolit`; NegEx: the marked mention) — TF-IDF + LR on their text joined per document, and
    Prisma's probe on the max over their codes (what a probe concept with `segment_words` reads
    on its own; the product also tries the whole note's codes beside them and keeps them where they
    cross-validate better: bench/scope_context.py): words against features on one unit.
Each set's `comparisons`: for the issues' (features, words) pairs, F1(features) - F1(words) on the same
held-out rows with a 95 % paired bootstrap interval (the product's `f1_difference`, what a concept page
shows beside its baselines): whether a gap is more than the noise of a few hundred rows.
Every stage records its seconds and peak RSS (VmHWM, reset before the stage). Embeddings are
cached in /tmp/prisma-bench with the seconds they took. Torch runs on one thread (see --threads).

    nice -n 10 python bench/status.py
    python bench/status.py --quick --precision int8   # → status-int8.json, each F1 beside fp32's (issue #29)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gateway.domain.concepts.probe import Split, heldout_split  # noqa: E402
from services.sae.encoding import encode_all  # noqa: E402
from services.sae.segments import Segments, pooled_codes, training_vectors  # noqa: E402
# the shared parts, which other benchmarks also read through this module
from status_core import (_MODEL, CACHE, CS, MODEL_NAME, PRECISION, PREDICTED, PROMPT, QUICK, SAE, WORD_STATES,  # noqa: E402,F401
                         DEFAULT_UNIT, _cache_key, _lr_cv, _model, _scored, comparisons, document_vectors,
                         run_dense, run_probe, run_regex, run_tfidf, segment_vectors, stage, train_sae)
from status_data import (LabelledSet, demo_regex, demo_regex_cues, demo_set, negex_regex,  # noqa: E402
                         negex_regex_cues, negex_set)
# status_variants.py reads these through this module
from status_expression import (USER_WORDS, WHOLE_WORDS, name_on_segments, run_expression,  # noqa: E402,F401
                               score_expression, user_expression)
from status_tokens import run_tokens, token_codes, token_states  # noqa: E402,F401

RESULTS = ROOT / "bench/results/status.json"
METHODS = ("regex", "regex_cues", "tfidf_lr", "dense_lr", "probe_documents", "probe_segments", "expression_scoped",
           "probe_tokens", "tfidf_anchored", "probe_anchored")
SEGMENTS_TRAIN_ON = "segments_and_documents"
# probe_anchored / tfidf_anchored: the segments that name the topic (demo: the regex user's topic word;
# NegEx: the marked mention, `[`)
ANCHORS = {"demo": r"bronchiolit", "negex": r"\["}

def segment_probe(x: np.ndarray, seg: Segments, ds: LabelledSet, split: Split, out: dict | None = None,
                  train_on: str = SEGMENTS_TRAIN_ON, seed: int = 0, keep: list | None = None, **sae: Any) -> dict:
    """The SAE on the training rows' segment (and document) vectors; a document's codes = the max
    over its segments' codes (services.sae.segments.pooled_codes); Prisma's probe on them."""
    out = {} if out is None else out
    with stage(out, "sae_segments"):
        x_train, x_hold = training_vectors(x, seg, train_on, split.train, split.test)
        model, out["sae_segments"] = train_sae(x_train, x_hold, seed, **sae)
        out["sae_segments"] |= {"train_on": train_on, "seed": seed}
        pooled = pooled_codes(model, seg, len(x))
        codes = pooled.documents  # [N, n] CSR, row-wise max over segments
        if keep is not None:
            keep.append(pooled)
    with stage(out, "probe_segments"):
        return run_probe(codes, ds, split)


def sensitivity(x: np.ndarray, seg: Segments, ds: LabelledSet, split: Split, variants: list[str]) -> list[dict]:
    """probe_segments again with one setting changed (`seed=1`, `train_on=segments`, `k=64`, ...):
    reported beside the headline, never used to choose it (that would be choosing on the test rows)."""
    rows = []
    for variant in variants:
        name, value = variant.split("=")
        kw: dict[str, Any] = {name: value if name == "train_on" else int(value)}
        out: dict = {}
        m = segment_probe(x, seg, ds, split, out, **kw)
        rows.append({"variant": variant, "f1": m["f1"], "precision": m["precision"], "recall": m["recall"],
                     "cv_f1_train": m["cv_f1_train"], "features_used": m["features_used"],
                     "fvu_heldout": out["sae_segments"]["fvu_heldout"],
                     "sae_seconds": out["stages"]["sae_segments"]["seconds"]})
    return rows


# --- anchored: features against words on the segments that name the topic (measured) ----------
def run_anchored(ds: LabelledSet, split: Split, seg: Segments, pooled: Any, out: dict) -> tuple[dict, dict]:
    """(tfidf_anchored, probe_anchored): both read only the segments whose text matches ANCHORS
    (a document without one has no text and zero codes). TF-IDF + LR on those segments' text
    joined per document; Prisma's probe on the max over those segments' codes (the SAE of
    probe_segments). The same unit for words and features: does the status of the topic's own
    mention read better from features or from words?"""
    import re

    from services.sae.encoding import max_pool_rows

    anchor = re.compile(ANCHORS[ds.name], re.IGNORECASE)
    pieces = [ds.texts[d][a:b] for d, a, b in zip(seg.position.tolist(), seg.char_start.tolist(), seg.char_end.tolist())]
    hit = np.array([bool(anchor.search(t)) for t in pieces])
    joined = [[] for _ in ds.texts]
    for i in np.flatnonzero(hit):
        joined[seg.position[i]].append(pieces[i])
    anchored = LabelledSet(ds.name, [" ".join(p) for p in joined], ds.y, ds.description)
    with stage(out, "tfidf_anchored"):
        tfidf = run_tfidf(anchored, split)
    with stage(out, "probe_anchored"):
        codes = max_pool_rows(pooled.segments.tocsr()[np.flatnonzero(hit)], seg.position[hit], len(ds.texts))
        probe = run_probe(codes, ds, split)
    out["anchored"] = {"pattern": ANCHORS[ds.name], "segments": int(hit.sum()),
                       "documents_with_one": int(len(np.unique(seg.position[hit])))}
    return tfidf, probe


# --- one set ---------------------------------------------------------------------------------
def _counts(seg: Segments, n_docs: int) -> dict:
    return {"rows": len(seg.position), "per_document_mean": round(len(seg.position) / n_docs, 2),
            "per_document_max": int(np.bincount(seg.position).max())}


def run_set(ds: LabelledSet, regexes: tuple[Callable[[str], int], Callable[[str], int]], variants: list[str]) -> dict:
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    out: dict[str, Any] = {"data": ds.description | {
        "train": len(split.train), "test": len(split.test),
        "test_positives": int(ds.y[split.test].sum()), "split": "stratified, 25 % held out, seed 0"}}
    methods: dict[str, Any] = dict.fromkeys(METHODS)
    with stage(out, "regex"):
        methods["regex"] = run_regex(ds, split, regexes[0])
    with stage(out, "regex_cues"):
        methods["regex_cues"] = run_regex(ds, split, regexes[1])
    with stage(out, "tfidf_lr"):
        methods["tfidf_lr"] = run_tfidf(ds, split)
    with stage(out, "embed_documents"):
        x, embed_s = document_vectors(ds)
    out["stages"]["embed_documents"]["embedding_seconds"] = round(embed_s, 1)  # 0-cost when read from the cache
    with stage(out, "dense_lr"):
        methods["dense_lr"] = run_dense(x, ds, split)
    if not QUICK[0]:
        with stage(out, "sae_documents"):
            # held out: the test rows' document vectors (the SAE never sees a test row)
            sae, out["sae_documents"] = train_sae(x[split.train], x[split.test])
            codes = encode_all(sae, x)  # [N, n] CSR
        with stage(out, "probe_documents"):
            methods["probe_documents"] = run_probe(codes, ds, split)
    with stage(out, "embed_segments"):
        seg, seg_s = segment_vectors(ds)  # the product's default unit (clauses)
    out["stages"]["embed_segments"]["embedding_seconds"] = round(seg_s, 1)
    out["segments"] = {"unit": DEFAULT_UNIT, **_counts(seg, len(x))}
    pooled: list = []
    methods["probe_segments"] = segment_probe(x, seg, ds, split, out, keep=pooled)
    methods["expression_scoped"] = run_expression(ds, split, seg, pooled[0], out)
    methods["tfidf_anchored"], methods["probe_anchored"] = run_anchored(ds, split, seg, pooled[0], out)
    if QUICK[0]:  # --quick: the methods of issue #28's goal and their baselines, not the sentence and token SAEs
        out["comparisons"] = comparisons(methods, ds.y[split.test])
        out["methods"], out["skipped"] = methods, ["probe_documents", "probe_segments_by_unit", "probe_tokens"]
        return out
    # The other unit, sentences (the default before clauses measured better): same SAE, same probe.
    with stage(out, "embed_sentences"):
        sentences, sent_s = segment_vectors(ds, "sentence")
    out["stages"]["embed_sentences"]["embedding_seconds"] = round(sent_s, 1)
    other: dict = {}
    by_sentence = segment_probe(x, sentences, ds, split, other)
    out["stages"] |= {f"{k.replace('segments', 'sentences')}": v for k, v in other["stages"].items()}
    out["probe_segments_by_unit"] = {
        unit: {"segments": _counts(s, len(x)), "fvu_heldout": o["sae_segments"]["fvu_heldout"],
               **{k: m[k] for k in ("f1", "precision", "recall", "cv_f1_train", "features_used")}}
        for unit, s, o, m in ((DEFAULT_UNIT, seg, out, methods["probe_segments"]),
                              ("sentence", sentences, other, by_sentence))}
    # token states per sentence (each sentence through the model on its own), as first measured
    methods["probe_tokens"] = run_tokens(ds, split, sentences, out)
    out["comparisons"] = comparisons(methods, ds.y[split.test])
    out["methods"] = methods
    out["probe_segments_sensitivity"] = sensitivity(x, seg, ds, split, variants)
    return out


def flat_keys(report: dict) -> dict:
    """`<set>.<method>.f1` (and precision, recall) for every set and method, null when not built."""
    flat = {}
    for name in ("demo", "negex"):
        for method, m in report.get(name, {}).get("methods", {}).items():
            for key in ("f1", "precision", "recall"):
                flat[f"{name}.{method}.{key}"] = None if m is None else m[key]
    return flat


def compare_fp32(report: dict, model: str) -> dict:
    """`<set>.<method>`: {"this": F1, "fp32": status.json's F1, "difference"} for the methods both measured."""
    fp32 = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    fp32 = fp32 if fp32.get("model") == model else fp32.get("minilm" if model == "all-MiniLM-L6-v2" else "e5", {})
    out = {}
    for key, f1 in report["f1"].items():
        before = (fp32.get("f1") or {}).get(key)
        if key.endswith(".f1") and f1 is not None and before is not None:
            out[key[:-3]] = {"this": f1, "fp32": before, "difference": round(f1 - before, 4)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 by default: on 2 shared cores an SAE step took 0.03 s on one "
                             "thread and 0.39 s on two (OpenMP barriers spinning)")
    parser.add_argument("--sensitivity", default="seed=1,seed=2",
                        help="probe_segments variants, comma-separated name=value ('' for none), e.g. "
                             "seed=1,train_on=segments,expansion_factor=16,k=64")
    parser.add_argument("--model", default=MODEL_NAME[0],
                        help="the encoder (an allowlist name); the file keeps the other model's figures "
                             "under the key `minilm` (or `e5`) for the comparison")
    parser.add_argument("--precision", choices=["fp32", "int8"], default="fp32",
                        help="the encoder's precision (int8: the CPU path 'auto' picks without native bf16); "
                             "int8 writes bench/results/status-int8.json by default, with its F1 beside fp32's")
    parser.add_argument("--prompt", default=None,
                        help="the model's prompt before every document and segment (E5: passage, its default, "
                             "or query, which the model card asks for when vectors are used as features)")
    parser.add_argument("--sets", default="demo,negex", help="which sets to run, comma-separated")
    parser.add_argument("--word-states", action="store_true",
                        help="segments read by their words (an embedding run's word_states): the SAE trains on the "
                             "words, a segment's codes the max over its words'; writes status-word-states.json")
    parser.add_argument("--quick", action="store_true",
                        help="skip the document SAE, the sentence unit and the token SAE (null in the file)")
    args = parser.parse_args()
    MODEL_NAME[0], QUICK[0], PRECISION[0], PROMPT[0] = args.model, args.quick, args.precision, args.prompt
    if args.precision != "fp32" and args.out == RESULTS:
        args.out = RESULTS.with_name(f"status-{args.precision}.json")
    WORD_STATES[0] = args.word_states
    if args.word_states and args.out == RESULTS:
        args.out = RESULTS.with_name("status-word-states.json")
    variants = [v.strip() for v in args.sensitivity.split(",") if v.strip()]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sets = {"demo": (demo_set, (demo_regex, demo_regex_cues)), "negex": (negex_set, (negex_regex, negex_regex_cues))}
    chosen = [s.strip() for s in args.sets.split(",") if s.strip()]
    report: dict[str, Any] = {"model": args.model, "precision": args.precision,
                              "prompt": _model().prompt}
    for name in chosen:
        make, regexes = sets[name]
        report[name] = run_set(make(), regexes, variants)
    report["command"] = " ".join(["python bench/status.py", *sys.argv[1:]])
    report["f1"] = flat_keys(report)
    report["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                         "torch_threads": torch.get_num_threads()}
    other = "e5" if args.model == "all-MiniLM-L6-v2" else "minilm"
    if args.precision != "fp32":  # beside the fp32 figures of status.json (same model), method by method
        report["vs_fp32"] = compare_fp32(report, args.model)
    elif args.out.exists():  # the other model's figures stay beside these
        before = json.loads(args.out.read_text())
        if before.get("model", "all-MiniLM-L6-v2") != args.model:
            report[other] = {k: v for k, v in before.items() if k not in ("minilm", "e5")}
            report[other].setdefault("model", "all-MiniLM-L6-v2")
        elif other in before:
            report[other] = before[other]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report["f1"].items() if k.endswith(".f1")}, indent=1))


if __name__ == "__main__":
    main()
