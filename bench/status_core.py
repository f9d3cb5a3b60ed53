"""What bench/status.py and its parts share: the embedding cache, the encoder, the classifiers and the SAE
trainer as the status benchmark runs them, and the stage timer. status_expression.py and status_tokens.py
import this, never status.py, so the benchmark's modules form no circle."""
from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contracts.sae import SaeConfig
from gateway.domain.concepts.baselines import TFIDF_TOKENS
from gateway.domain.concepts.probe import Split, binary_metrics, fit_probe
from services.embedder.segments import DEFAULT_UNIT
from services.sae.segments import Segments
from services.sae.trainer import SaeTrainer, holdout_metrics
from status_data import LabelledSet

CACHE = Path("/tmp/prisma-bench")
CS = np.logspace(-3, 3, 13)
SAE = {"expansion_factor": 8, "k": 32, "max_steps": 2000, "lr": 3e-3, "batch_size": 256}  # bench/probe.py's schedule


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


PREDICTED = "_predicted"
"""The held-out predictions a method's figures carry until `comparisons` reads them (not written to the file)."""
COMPARED = (("probe_segments", "tfidf_lr"), ("probe_segments", "regex_cues"), ("probe_tokens", "tfidf_lr"),
            ("expression_scoped", "regex"), ("expression_scoped", "regex_cues"))
"""(features, words) pairs whose F1 difference gets a paired bootstrap interval: the issues' goals."""


def _scored(y_test: np.ndarray, pred: np.ndarray, **extra: Any) -> dict:
    pred = np.asarray(pred, dtype=np.int64)
    return binary_metrics(y_test, pred) | {PREDICTED: pred} | extra


def comparisons(methods: dict[str, Any], y_test: np.ndarray) -> dict[str, Any]:
    """For each COMPARED pair both measured: F1(features) - F1(words) on the same held-out rows with a 95 %
    paired bootstrap interval (the product's `f1_difference`, what a concept page shows beside its baselines);
    then every method's predictions are dropped."""
    from gateway.domain.concepts.probe import f1_difference

    out = {}
    for a, b in COMPARED:
        if (methods.get(a) or {}).get(PREDICTED) is not None and (methods.get(b) or {}).get(PREDICTED) is not None:
            out[f"{a}_vs_{b}"] = f1_difference(y_test, methods[a][PREDICTED], methods[b][PREDICTED])
    for m in methods.values():
        if isinstance(m, dict):
            m.pop(PREDICTED, None)
    return out


def run_regex(ds: LabelledSet, split: Split, fn: Callable[[str], int]) -> dict:
    return _scored(ds.y[split.test], [fn(ds.texts[i]) for i in split.test])


def run_tfidf(ds: LabelledSet, split: Split) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, token_pattern=TFIDF_TOKENS)
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
    """The product's probe on `codes`: its readout (gateway.domain.concepts.readout.fit_readout: row-L2 + L2 or
    raw codes + L1, and C, chosen by CV on the training rows), P >= 0.5 on the held-out rows; `l1` beside it: the
    L1 probe alone (fit_probe, the default before the readout was), on the same codes and rows."""
    from gateway.domain.concepts.readout import fit_readout

    y_test = ds.y[split.test]
    fitted = fit_readout(codes[split.train], ds.y[split.train], seed=0)
    l1 = fit_probe(codes[split.train], ds.y[split.train], seed=0)
    before = binary_metrics(y_test, np.asarray(l1.predict(codes[split.test]), dtype=np.int64))
    return _scored(y_test, (fitted.probability(codes[split.test]) >= 0.5).astype(np.int64), readout=fitted.readout,
                   C=round(fitted.probe.C, 4), cv_f1_train=round(fitted.probe.cv_score, 4),
                   features_used=int(np.count_nonzero(fitted.probe.coef)), converged=True,
                   l1={"f1": before["f1"], "C": round(l1.C, 4), "features_used": len(l1.used_features)})


# --- embeddings ------------------------------------------------------------------------------
_MODEL: list[Any] = []
MODEL_NAME = ["multilingual-e5-small"]
QUICK = [False]  # --quick  # --model: an allowlist name; cache files are per model
PRECISION = ["fp32"]  # --precision: fp32 (the vectors of status.json) or int8 (the CTranslate2 engine, services/embedder/ct2.py)
PROMPT: list[str | None] = [None]  # --prompt: the model's prompt before every text (None: its default, E5 'passage')
WORD_STATES = [False]  # --word-states: segments read by their words, as an embedding run with `word_states`


def _model() -> Any:
    if not _MODEL:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from services.embedder.models import load_model

        lm = load_model(MODEL_NAME[0], device=torch.device("cpu"), int8=PRECISION[0] == "int8")
        _MODEL.append(lm.with_prompt(PROMPT[0]))
    return _MODEL[0]


def _cache_key(ds: LabelledSet) -> str:
    """The texts' hash, with the model's name (MiniLM's cache files keep their old names)."""
    key = hashlib.sha256("\x00".join(ds.texts).encode()).hexdigest()[:16]
    key = key if PRECISION[0] == "fp32" else f"{PRECISION[0]}-ctranslate2-{key}"  # int8: its default engine
    key = key if PROMPT[0] is None else f"prompt-{PROMPT[0]}-{key}"
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
    and the seconds taken. With --word-states (`WORD_STATES`) also their words, each read in its text by the
    texts' own pass (included in the seconds), which the SAE then reads as a run with `word_states` does."""
    from services.embedder.segments import embed_documents, embed_segments

    words = WORD_STATES[0]
    path = CACHE / f"status-{ds.name}-segments-{unit}{'-words' if words else ''}-{_cache_key(ds)}.npz"
    if path.exists():
        with np.load(path) as z:
            kept = (z["words"], z["word_segment"]) if words else ()
            return Segments(z["vectors"], z["position"], z["char_start"], z["char_end"], *kept), float(z["seconds"])
    t0 = time.perf_counter()
    if words:
        _, seg = embed_documents(_model(), ds.texts, segments=True, unit=unit, documents="encoded", word_states=True,
                                 pooling="mean", normalize=True)
    else:
        seg = embed_segments(_model(), ds.texts, pooling="mean", normalize=True, unit=unit)
    seconds = time.perf_counter() - t0
    CACHE.mkdir(parents=True, exist_ok=True)
    kept = {"words": seg.word_vectors, "word_segment": seg.word_segment} if words else {}
    np.savez(path, vectors=seg.vectors, position=seg.doc, char_start=seg.char_start, char_end=seg.char_end,
             seconds=seconds, **kept)
    return Segments(seg.vectors, seg.doc, seg.char_start, seg.char_end, seg.word_vectors, seg.word_segment), seconds
