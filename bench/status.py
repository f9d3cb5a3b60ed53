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
    (`gateway.domain.concepts.probe.fit_probe`: L1, C by CV, one-standard-error rule) on the codes;
  - probe_segments: every text cut by Prisma's segmenter (services/embedder/segments.py, its default
    unit: clauses) and each segment embedded as an embedding run with `segments` does; the SAE (same
    settings) trained on the training rows' segment and document vectors
    (services.sae.segments.training_vectors); a document's codes = the row-wise max of its segments'
    codes (pooled_codes); Prisma's probe on them. `probe_segments_by_unit` has the same with
    sentences as the unit beside it;
  - expression_scoped: the features named on segments by Prisma's keywords back-end (the naming job's
    segment corpus, services.interpreter.corpus.segment_corpus, with its term index and the label
    embedder of bench/interpret.py), then a scoped expression written from the labels alone, as a
    user reading the features list would: `SEGMENT((<topic> OR ...) AND NOT (<cue> OR ...))`, where the
    topic features are those whose label's first term starts with the topic word (demo:
    `bronchiolit`; negex: none, every row is a mention) and the cue features those whose first term
    starts with one of the cue words of regex_cues (the same words a regex user wrote). No feature is
    chosen by index or by the class labels; the expression and its features' labels are recorded;
  - probe_tokens (measured for item 3, not a product path): an SAE (same settings, 2,000 steps) on
    the last hidden state of every content token of every sentence (each sentence through the model
    on its own; unit norm; the training rows' tokens), every token encoded, max-pooled to sentences
    and then to documents, Prisma's probe on the documents' codes;
  - tfidf_anchored and probe_anchored: only the segments whose text names the topic (demo:
    `bronchiolit`; NegEx: the marked mention) — TF-IDF + LR on their text joined per document, and
    Prisma's probe on the max over their codes (what a probe concept with `segment_words` reads):
    words against features on one unit.
Every stage records its seconds and peak RSS (VmHWM, reset before the stage). Embeddings are
cached in /tmp/prisma-bench with the seconds they took. Torch runs on one thread (see --threads).

    nice -n 10 python bench/status.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from contracts.sae import SaeConfig  # noqa: E402
from gateway.domain.concepts.probe import Split, binary_metrics, fit_probe, heldout_split  # noqa: E402
from services.sae.encoding import encode_all  # noqa: E402
from services.embedder.segments import DEFAULT_UNIT  # noqa: E402
from services.sae.segments import Segments, pooled_codes, training_vectors  # noqa: E402
from services.sae.trainer import SaeTrainer, holdout_metrics  # noqa: E402
from status_data import (LabelledSet, demo_regex, demo_regex_cues, demo_set, negex_regex,  # noqa: E402
                         negex_regex_cues, negex_set)

CACHE = Path("/tmp/prisma-bench")
RESULTS = ROOT / "bench/results/status.json"
CS = np.logspace(-3, 3, 13)
SAE = {"expansion_factor": 8, "k": 32, "max_steps": 2000, "lr": 3e-3}  # bench/probe.py's schedule
METHODS = ("regex", "regex_cues", "tfidf_lr", "dense_lr", "probe_documents", "probe_segments", "expression_scoped",
           "probe_tokens", "tfidf_anchored", "probe_anchored")
# expression_scoped: the words a user starts from (topic; the cue words of regex_cues, as written there)
USER_WORDS = {"demo": (("bronchiolit",), ("sospett", "?", "esclus", "possibil", "probabil", "pregress")),
              "negex": ((), ("no", "not", "denies", "denied", "without", "negative", "free", "ruled", "absence",
                             "absent", "resolved", "declined", "neither", "nor", "unlikely"))}
SEGMENTS_TRAIN_ON = "segments_and_documents"
# probe_anchored / tfidf_anchored: the segments that name the topic (demo: the regex user's topic word;
# NegEx: the marked mention, `[`)
ANCHORS = {"demo": r"bronchiolit", "negex": r"\["}
TOKENS = r"(?u)\b\w\w+\b|[\[\]?]"  # TF-IDF words, plus the mention marker and the question mark


# --- measuring -------------------------------------------------------------------------------
def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))


@contextmanager
def stage(record: dict, name: str) -> Iterator[None]:
    """Seconds and peak RSS (MB) of the block, into record['stages'][name]."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    t0 = time.perf_counter()
    yield
    record.setdefault("stages", {})[name] = {"seconds": round(time.perf_counter() - t0, 2),
                                             "peak_rss_mb": round(_status_kb("VmHWM:") / 1024, 1)}


# --- classifiers -----------------------------------------------------------------------------
def _lr_cv(x_train: Any, y_train: np.ndarray) -> Any:
    """L2 logistic regression, classes balanced, C by stratified 5-fold CV on F1."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    model = LogisticRegressionCV(Cs=CS, l1_ratios=(0.0,), solver="lbfgs", class_weight="balanced", max_iter=3000,
                                 scoring="f1", cv=StratifiedKFold(5, shuffle=True, random_state=0),
                                 use_legacy_attributes=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs at the largest C may stop at max_iter; the score says so
        model.fit(x_train, y_train)
    return model


def _scored(y_test: np.ndarray, pred: np.ndarray, **extra: Any) -> dict:
    return binary_metrics(y_test, np.asarray(pred, dtype=np.int64)) | extra


def run_regex(ds: LabelledSet, split: Split, fn: Callable[[str], int]) -> dict:
    return _scored(ds.y[split.test], [fn(ds.texts[i]) for i in split.test])


def run_tfidf(ds: LabelledSet, split: Split) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, token_pattern=TOKENS)
    xt = tfidf.fit_transform([ds.texts[i] for i in split.train])
    model = _lr_cv(xt, ds.y[split.train])
    pred = model.predict(tfidf.transform([ds.texts[i] for i in split.test]))
    return _scored(ds.y[split.test], pred, C=float(model.C_), features=int(xt.shape[1]))


def run_dense(x: np.ndarray, ds: LabelledSet, split: Split) -> dict:
    model = _lr_cv(x[split.train], ds.y[split.train])
    return _scored(ds.y[split.test], model.predict(x[split.test]), C=float(model.C_))


def train_sae(x_train: np.ndarray, x_hold: np.ndarray, seed: int = 0, **changed: Any) -> tuple[Any, dict]:
    """Prisma's trainer on x_train [N, d] (SAE settings, some `changed`); held-out FVU on x_hold
    (rows never trained on)."""
    settings = SAE | changed
    cfg = SaeConfig(**settings, seed=seed, device="cpu")
    trainer = SaeTrainer(torch.from_numpy(np.ascontiguousarray(x_train, dtype=np.float32)), cfg, torch.device("cpu"))
    for _ in range(trainer.total_steps):
        trainer.train_step()
    metrics = holdout_metrics(trainer.sae, np.ascontiguousarray(x_hold, dtype=np.float32), 0.0)
    return trainer.sae, {"n": trainer.sae.num_latents, **settings, "batch_size": trainer.batch_size,
                         "train_vectors": len(x_train), "fvu_train_last": round(trainer.curve[-1]["fvu"], 4),
                         "fvu_heldout": round(metrics.fvu, 4), "heldout_vectors": len(x_hold)}


def run_probe(codes: Any, ds: LabelledSet, split: Split) -> dict:
    probe = fit_probe(codes[split.train], ds.y[split.train], seed=0)
    return _scored(ds.y[split.test], probe.predict(codes[split.test]), C=round(probe.C, 4),
                   features_used=len(probe.used_features), converged=probe.converged)


# --- embeddings ------------------------------------------------------------------------------
_MODEL: list[Any] = []
MODEL_NAME = ["multilingual-e5-small"]  # --model: an allowlist name; cache files are per model


def _model() -> Any:
    if not _MODEL:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from services.embedder.models import load_model

        _MODEL.append(load_model(MODEL_NAME[0], device=torch.device("cpu")))
    return _MODEL[0]


def _cache_key(ds: LabelledSet) -> str:
    """The texts' hash, with the model's name (MiniLM's cache files keep their old names)."""
    key = hashlib.sha256("\x00".join(ds.texts).encode()).hexdigest()[:16]
    return key if MODEL_NAME[0] == "all-MiniLM-L6-v2" else f"{MODEL_NAME[0]}-{key}"


def document_vectors(ds: LabelledSet) -> tuple[np.ndarray, float]:
    """[N, 384] Prisma document vectors (cached by the texts' hash) and the seconds they took."""
    from services.embedder.encoder import embed_texts

    path = CACHE / f"status-{ds.name}-documents-{_cache_key(ds)}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["x"], float(z["seconds"])
    t0 = time.perf_counter()
    x = embed_texts(_model(), ds.texts, pooling="mean", normalize=True).vectors
    seconds = time.perf_counter() - t0
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, x=x, seconds=seconds)
    return x, seconds


def segment_vectors(ds: LabelledSet, unit: str = DEFAULT_UNIT) -> tuple[Segments, float]:
    """Every text's segments of `unit` (services.embedder.segments: clauses or sentences, lines,
    windows), each embedded by Prisma's encoder as an embedding run with `segments` does (cached),
    and the seconds taken."""
    from services.embedder.segments import embed_segments

    path = CACHE / f"status-{ds.name}-segments-{unit}-{_cache_key(ds)}.npz"
    if path.exists():
        with np.load(path) as z:
            return Segments(z["vectors"], z["position"], z["char_start"], z["char_end"]), float(z["seconds"])
    t0 = time.perf_counter()
    seg = embed_segments(_model(), ds.texts, pooling="mean", normalize=True, unit=unit)
    seconds = time.perf_counter() - t0
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=seg.vectors, position=seg.doc, char_start=seg.char_start, char_end=seg.char_end,
             seconds=seconds)
    return Segments(seg.vectors, seg.doc, seg.char_start, seg.char_end), seconds


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
        probe = fit_probe(codes[split.train], ds.y[split.train], seed=0)
        return _scored(ds.y[split.test], probe.predict(codes[split.test]), C=round(probe.C, 4),
                       cv_f1_train=round(probe.cv_score, 4), features_used=len(probe.used_features),
                       converged=probe.converged)


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


# --- expression_scoped: names on segments, an expression from them ---------------------------
def name_on_segments(ds: LabelledSet, seg: Segments, segment_codes: Any) -> tuple[dict[int, str], dict]:
    """Every feature that fires on a segment, named by the keywords back-end on the segment corpus
    (what the naming job does for a run with segment codes); (labels, timing)."""
    import asyncio

    import pyarrow as pa
    from interpret import label_embedder

    from contracts.interpret import BackendOptions
    from services.interpreter.backends import build_backend
    from services.interpreter.config import InterpreterSettings
    from services.interpreter.corpus import segment_corpus
    from services.interpreter.naming import Namer

    table = pa.table({"position": np.arange(len(ds.texts)), "doc_id": np.arange(len(ds.texts)), "text": ds.texts})
    shard = {"vectors": seg.vectors, "position": seg.position, "char_start": seg.char_start, "char_end": seg.char_end}
    corpus = segment_corpus(table, [shard], segment_codes.tocsr())
    opts = BackendOptions(backend="keywords")
    namer = Namer(corpus=corpus, backends=[(opts, build_backend(opts, InterpreterSettings()))],
                  embed_texts=label_embedder(1, MODEL_NAME[0]))
    features = [int(f) for f in np.flatnonzero(corpus.codes.getnnz(axis=0) > 0)]
    t0, records = time.perf_counter(), []
    for i in range(0, len(features), 256):
        pool = [r.interpretations[r.best].label for r in records[-256:] if r.best is not None]
        records += asyncio.run(namer.name_features(features[i:i + 256], pool))
    labels = {r.feature: r.interpretations[r.best].label for r in records if r.best is not None}
    return labels, {"features_named": len(labels), "naming_seconds": round(time.perf_counter() - t0, 1)}


def _first_term_starts(label: str, stems: tuple[str, ...]) -> bool:
    import re

    words = re.findall(r"\w+|\?", label.split(",")[0].casefold())
    return any(w.startswith(s) for w in words for s in stems)


def user_expression(labels: dict[int, str], topic: tuple[str, ...], cues: tuple[str, ...]) -> tuple[str, dict]:
    """The expression a user writes from the labels (see the module's docstring), F<n> for brevity."""
    topic_f = sorted(i for i, lab in labels.items() if topic and _first_term_starts(lab, topic)
                     and not _first_term_starts(lab, cues))
    cue_f = sorted(i for i, lab in labels.items() if _first_term_starts(lab, cues))
    cue_part = " OR ".join(f"F{i}" for i in cue_f) or "F0 < 0"
    inner = (f"({' OR '.join(f'F{i}' for i in topic_f)}) AND NOT ({cue_part})" if topic_f
             else f"NOT ({cue_part})")
    return f"SEGMENT({inner})", {"topic_features": {str(i): labels[i] for i in topic_f},
                                 "cue_features": {str(i): labels[i] for i in cue_f}}


def run_expression(ds: LabelledSet, split: Split, seg: Segments, pooled: Any, out: dict) -> dict | None:
    with stage(out, "name_segments"):
        labels, out["naming"] = name_on_segments(ds, seg, pooled.segments)
    topic, cues = USER_WORDS[ds.name]
    expression, chosen = user_expression(labels, topic, cues)
    if len(chosen["topic_features"]) + len(chosen["cue_features"]) > 256:  # the language's cap
        out["expression_scoped"] = {"skipped": "more than 256 features", **chosen}
        return None
    with stage(out, "expression_scoped"):
        scored = score_expression(ds, split, seg, pooled.segments, pooled.documents, labels, expression)
    out["expression_scoped"] = {"expression": expression, **chosen}
    return scored


def score_expression(ds: LabelledSet, split: Split, seg: Segments, segment_codes: Any, document_codes: Any,
                     labels: dict[int, str], expression: str) -> dict:
    """The expression evaluated by Prisma's evaluator over these codes (SEGMENT(…) on `seg`'s rows),
    scored on the held-out rows."""
    from gateway.search.expressions import SearchSpace, SegmentCodes, evaluate

    spans = np.stack([seg.char_start, seg.char_end], axis=1)
    space = SearchSpace(document_codes.tocsc(), labels, {}, SegmentCodes(segment_codes, seg.position, spans))
    match = evaluate(expression, space)
    return _scored(ds.y[split.test], match.mask[split.test].astype(np.int64))


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


# --- probe_tokens: an SAE on token hidden states (issue #16 item 3, measured here) ------------
def token_states(ds: LabelledSet, seg: Segments) -> tuple[np.ndarray, np.ndarray, float]:
    """float16 [T, d] last hidden state of every content token of every segment (each segment run
    through the model on its own, as its segment vector was) and the segment of each [T] (cached)."""
    from services.embedder.chunking import chunk_token_windows, pack_batches
    from services.embedder.encoder import build_batch, tokenize_texts

    path = CACHE / f"status-{ds.name}-tokens-{_cache_key(ds)}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["x"], z["owner"], float(z["seconds"])
    t0 = time.perf_counter()
    lm = _model()
    pieces = [ds.texts[d][a:b] for d, a, b in zip(seg.position.tolist(), seg.char_start.tolist(), seg.char_end.tolist())]
    tok = tokenize_texts(lm, pieces)
    plan = chunk_token_windows(tok.n_tokens, lm.window)
    p = len(lm.prefix_ids)
    states, owner = [], []
    with torch.inference_mode():
        for idx in pack_batches(plan.lengths + lm.n_special, batch_tokens=16384, max_batch_size=1024):
            b = build_batch(lm, tok, plan, idx, "mean")
            hidden = lm.model(input_ids=b.input_ids, attention_mask=b.attention_mask).last_hidden_state.float()
            for j, c in enumerate(idx):
                n = int(plan.lengths[c])
                states.append(hidden[j, p:p + n].numpy().astype(np.float16))
                owner.append(np.full(n, plan.doc[c], dtype=np.int64))
    x, who = np.concatenate(states), np.concatenate(owner)
    order = np.argsort(who, kind="stable")
    seconds = time.perf_counter() - t0
    np.savez(path, x=x[order], owner=who[order], seconds=seconds)
    return x[order], who[order], seconds


def token_codes(x: np.ndarray, owner: np.ndarray, seg: Segments, split: Split, n_docs: int) -> tuple[dict, Any, Any]:
    """The token SAE (unit-norm states `x` [T, d] of the segments `owner` [T]; trained on the
    training rows' tokens, its FVU on at most 50,000 held-out ones) and (its description, codes
    max-pooled to segments [S, n], then to documents [n_docs, n])."""
    from services.sae.encoding import max_pool_rows

    in_train = np.isin(seg.position[owner], split.train)
    hold = np.flatnonzero(~in_train)
    hold = np.random.default_rng(0).choice(hold, min(len(hold), 50_000), replace=False)
    sae, info = train_sae(x[in_train], x[np.sort(hold)])
    segment_codes = max_pool_rows(encode_all(sae, x), owner, len(seg.position))
    return info, segment_codes, max_pool_rows(segment_codes, seg.position, n_docs)


def run_tokens(ds: LabelledSet, split: Split, seg: Segments, out: dict) -> dict:
    with stage(out, "embed_tokens"):
        x16, owner, seconds = token_states(ds, seg)
    out["stages"]["embed_tokens"]["embedding_seconds"] = round(seconds, 1)
    with stage(out, "sae_tokens"):
        x = x16.astype(np.float32)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)
        out["sae_tokens"], _, codes = token_codes(x, owner, seg, split, len(ds.texts))
        out["sae_tokens"]["tokens"] = len(x)
    with stage(out, "probe_tokens"):
        return run_probe(codes, ds, split)


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
    out["methods"] = methods
    out["probe_segments_sensitivity"] = sensitivity(x, seg, ds, split, variants)
    return out


def flat_keys(report: dict) -> dict:
    """`<set>.<method>.f1` (and precision, recall) for every set and method, null when not built."""
    flat = {}
    for name in ("demo", "negex"):
        for method, m in report[name]["methods"].items():
            for key in ("f1", "precision", "recall"):
                flat[f"{name}.{method}.{key}"] = None if m is None else m[key]
    return flat


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
    args = parser.parse_args()
    MODEL_NAME[0] = args.model
    variants = [v.strip() for v in args.sensitivity.split(",") if v.strip()]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    report: dict[str, Any] = {
        "model": args.model,
        "demo": run_set(demo_set(), (demo_regex, demo_regex_cues), variants),
        "negex": run_set(negex_set(), (negex_regex, negex_regex_cues), variants),
    }
    report["command"] = " ".join(["python bench/status.py", *sys.argv[1:]])
    report["f1"] = flat_keys(report)
    report["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                         "torch_threads": torch.get_num_threads()}
    other = "e5" if args.model == "all-MiniLM-L6-v2" else "minilm"
    if args.out.exists():  # the other model's figures stay beside these
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
