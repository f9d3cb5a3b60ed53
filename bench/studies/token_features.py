"""Token-level features on E3C: what a probe reaches when the SAE learns from e5's token states (each word piece's
last hidden state, read in its sentence's context) instead of from clause and sentence vectors, and when the probe
reads the pieces of the annotated mentions. A negation or a hedge changes the states of the words it governs, and
a cue word ("no", "sin", "pas", "ez") is a piece of its own: a token feature can carry what a sentence vector
averages away.

Per language: the layer-1 sentences and a seeded sample of layer-3 cases (bench/real_sets.py's `_layer3`, capped
at --layer3-chars) are read by the product's default model (multilingual-e5-small, fp32, its passage prompt)
and kept as the product keeps segment_unit "token" and "word" (services/embedder/segments.py `token_segments`:
each content piece's state, a white-space word the mean of its pieces', at unit norm); a TopK SAE (the product's trainer, expansion 8, k 32, --sae-samples rows) learns from
the layer-3 pieces alone (10 % of the cases held out for its FVU). Each sentence is then read as:

  - sentence_dense: the mean of its pieces' states (about the run's sentence vector), dense L2 LR;
  - mention_dense: the mean of the states of the pieces inside its events' offsets, dense L2 LR;
  - token_max: the max over its pieces of their SAE codes (no offsets needed), the product's readout;
  - mention_codes: the max over the pieces inside its events' offsets, the product's readout;
  - mention_with_tokens: both code views side by side, the product's readout;
  - word_max: the pieces of each white-space word averaged (unit norm) into one vector, an SAE of the same
    settings trained on the layer-3 words, a sentence the max over its words' codes (a feature then fires on a
    word a name can quote, not on a piece such as "chi" of "bron|chi|oli|te");
  - tfidf_lr: TF-IDF + LR as the concept page fits it.

The split and draws are bench/real_text.py's (`group_split` by case, 25 % held out; 10 draws at 50, 100, 200;
all labels once), the same rows as bench/results/e3c.json's, whose `probe` and `dense_lr` figures are copied
beside for reference. F1 of `not_actual` on the held-out sentences.

    nice -n 10 .venv/bin/python bench/studies/token_features.py --languages en,es,fr,eu

Writes bench/studies/results/token-features.json (token states cached under /tmp/prisma-bench/tokens).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import E3C, POSITIVE, _layer3  # noqa: E402
from bench.real_text import dense_lr  # noqa: E402
from bench.studies import e3c_study  # noqa: E402
from contracts.sae import SaeConfig  # noqa: E402
from contracts.sparse import max_pool_rows  # noqa: E402
from gateway.domain.concepts.readout import fit_readout  # noqa: E402
from services.embedder.encoder import embed_texts  # noqa: E402
from services.embedder.segments import TOKEN, WORD, token_segments  # noqa: E402
from services.sae.encoding import encode_all  # noqa: E402
from services.sae.trainer import SaeTrainer, holdout_metrics, holdout_split  # noqa: E402

OUT = ROOT / "bench/studies/results/token-features.json"
CACHE = Path("/tmp/prisma-bench/tokens")
METHODS = ["sentence_dense", "mention_dense", "token_max", "mention_codes", "mention_with_tokens", "word_max",
           "tfidf_lr"]
DENSE = ("sentence_dense", "mention_dense")
ARGS = SimpleNamespace(layer3_chars=1_000_000, sae_samples=1_000_000, expansion=8, k=32)


class Tokens(NamedTuple):
    states: np.ndarray  # float32 [T, d]: every content piece's (or word's) state in its text, unit rows
    owner: np.ndarray  # int64 [T]: each row's text
    span: np.ndarray  # int64 [T, 2]: each row's characters in its text


def _model():  # noqa: ANN202
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from services.embedder.models import load_model

    return load_model("multilingual-e5-small", device=torch.device("cpu"), int8=False).with_prompt(None)


def read_in_context(lm, texts: list[str]) -> dict[str, Tokens]:  # noqa: ANN001
    """Every piece's and every white-space word's state as the product keeps them for segment_unit "token" and
    "word", from one pass: `embed_texts(token_states=True)` (prompt, specials and windows as a run reads its
    notes), then `token_segments` (pieces of white space left out; a word the mean of its pieces'; unit rows)."""
    emb = embed_texts(lm, texts, token_states=True)
    out = {}
    for unit in (TOKEN, WORD):
        seg = token_segments(texts, emb, unit)
        out[unit] = Tokens(seg.vectors.astype(np.float32), seg.doc,
                           np.stack([seg.char_start, seg.char_end], 1).astype(np.int64))
    return out


def cached_states(lm, name: str, texts: list[str]) -> dict[str, Tokens]:  # noqa: ANN001
    paths = {unit: CACHE / f"{name}-{unit}.npz" for unit in (TOKEN, WORD)}
    if all(p.exists() for p in paths.values()):
        out = {}
        for unit, path in paths.items():
            with np.load(path) as z:
                out[unit] = Tokens(z["states"], z["owner"], z["span"])
        return out
    t0 = time.perf_counter()
    out = read_in_context(lm, texts)
    print(f"  {name}: {len(out[TOKEN].states):,} pieces in {time.perf_counter() - t0:.0f} s", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    for unit, t in out.items():
        np.savez(paths[unit], states=t.states, owner=t.owner, span=t.span)
    return out


def in_mentions(t: Tokens, events: list[list[tuple[int, int]]]) -> np.ndarray:
    """bool [T]: the pieces that overlap one of their text's event offsets."""
    hit = np.zeros(len(t.owner), bool)
    for d, spans in enumerate(events):
        lo, hi = np.searchsorted(t.owner, [d, d + 1])
        for s, e in spans:
            hit[lo:hi] |= (t.span[lo:hi, 0] < e) & (t.span[lo:hi, 1] > s)
    return hit


def mean_rows(states: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, states.shape[1]), np.float32)
    np.add.at(out, owner, states)
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def train_sae(x: np.ndarray, owner: np.ndarray, n_cases: int) -> tuple[object, dict]:
    _, hold_cases = holdout_split(n_cases, 0.1, 0)
    held = np.isin(owner, hold_cases)
    cfg = SaeConfig(expansion_factor=ARGS.expansion, k=ARGS.k, max_steps=max(1, ARGS.sae_samples // 256),
                    seed=0, device="cpu")
    trainer = SaeTrainer(torch.from_numpy(np.ascontiguousarray(x[~held])), cfg, torch.device("cpu"))
    t0 = time.perf_counter()
    for _ in range(trainer.total_steps):
        trainer.train_step()
    m = holdout_metrics(trainer.sae, np.ascontiguousarray(x[held]), 0.0)
    return trainer.sae, {"expansion_factor": ARGS.expansion, "k": ARGS.k, "n": trainer.sae.num_latents,
                         "steps": trainer.total_steps, "train_pieces": int((~held).sum()),
                         "heldout_pieces": int(held.sum()), "fvu_heldout": round(float(m.fvu), 4),
                         "seconds": round(time.perf_counter() - t0, 1)}


def language(lang: str) -> dict:
    with (E3C / lang / "layer1-sentences.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    texts = [r["text"] for r in rows]
    events = [[(int(s), int(e)) for s, e, *_ in json.loads(r["events"])] for r in rows]
    y = np.array([int(r["labels"] == POSITIVE) for r in rows], np.int64)
    cases, info = _layer3(lang, ARGS.layer3_chars)
    lm = _model()
    corpus_texts = [c["text"] for c in cases]
    sentences = cached_states(lm, f"{lang}-sentences", texts)
    cased = cached_states(lm, f"{lang}-layer3-{ARGS.layer3_chars}", corpus_texts)
    sent, corpus, sent_words, corpus_words = sentences[TOKEN], cased[TOKEN], sentences[WORD], cased[WORD]
    sae, sae_info = train_sae(corpus.states, corpus.owner, len(cases))
    print(f"  {lang} SAE: {sae_info}", flush=True)
    word_sae, word_info = train_sae(corpus_words.states, corpus_words.owner, len(cases))
    print(f"  {lang} word SAE: {word_info}", flush=True)
    codes = encode_all(sae, sent.states)
    hit = in_mentions(sent, events)
    m_rows = np.flatnonzero(hit)
    views = {
        "sentence_dense": mean_rows(sent.states, sent.owner, len(texts)),
        "mention_dense": mean_rows(sent.states[hit], sent.owner[hit], len(texts)),
        "token_max": max_pool_rows(codes, sent.owner, len(texts)),
        "mention_codes": max_pool_rows(codes[m_rows], sent.owner[m_rows], len(texts)),
    }
    views["word_max"] = max_pool_rows(encode_all(word_sae, sent_words.states), sent_words.owner, len(texts))
    views["mention_with_tokens"] = sp.hstack([views["mention_codes"], views["token_max"]], format="csr")
    ds = SimpleNamespace(texts=texts, y=y, group=np.array([r["doc"] for r in rows]), labelled=np.arange(len(rows)))

    def predict(train: np.ndarray, test: np.ndarray, d: int) -> dict[str, np.ndarray]:
        out = {}
        for m in METHODS[:-1]:
            x = views[m]
            if m in DENSE:
                out[m] = dense_lr(x[train], y[train], d).predict(x[test]).astype(np.int64)
            else:
                out[m] = (fit_readout(x[train], y[train], seed=d).probability(x[test]) >= 0.5).astype(np.int64)
        return out

    result = e3c_study.score_draws(lang, ds, METHODS, predict)
    ref = json.loads((ROOT / "bench/results/e3c.json").read_text())["languages"].get(lang, {})
    return {"layer3": info, "sae": sae_info, "word_sae": word_info, "sentences_with_mention_pieces": round(float(
        np.isin(np.arange(len(texts)), sent.owner[hit]).mean()), 4),
        **result, "e3c_json": {m: ref[m]["f1_at"] for m in ("probe", "tfidf_lr", "dense_lr") if m in ref}}


if __name__ == "__main__":
    torch.set_num_threads(os.cpu_count() or 1)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--layer3-chars", type=int, default=ARGS.layer3_chars)
    parser.add_argument("--sae-samples", type=int, default=ARGS.sae_samples)
    known, rest = parser.parse_known_args()
    ARGS.layer3_chars, ARGS.sae_samples = known.layer3_chars, known.sae_samples
    sys.argv = [sys.argv[0], *rest]
    e3c_study.main(__doc__, OUT, METHODS, language, "bench/studies/token_features.py")
