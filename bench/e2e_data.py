"""bench/e2e.py's corpus and vectors: the demo generator's notes, synthetic vectors mixed from real
donors (optionally widened), the donors themselves, and a query model of any width."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from bench.e2e_deploy import Deployment
from gateway.demo.corpus import generate_notes


def write_corpus(path: Path, n: int) -> list[list[str]]:
    """The generator's CSV (as `prisma demo-corpus` writes it); returns each note's labels."""
    labels = []
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "labels", "condition", "status"])
        for note in generate_notes(n, seed=0):
            w.writerow([note.id, note.text, "|".join(note.labels), note.condition, note.status])
            labels.append(note.labels)
    return labels


def synthetic_vectors(labels: list[list[str]], donors: Path, noise: float, seed: int = 0) -> np.ndarray:
    """[N, d] float32, unit rows: two real donors' mean with the note's label set, plus noise."""
    src = np.load(donors, allow_pickle=False)
    vecs, donor_labels = src["vectors"].astype(np.float32), [str(s) for s in src["labels"]]
    by_set: dict[str, list[int]] = {}
    by_primary: dict[str, list[int]] = {}
    for i, s in enumerate(donor_labels):
        by_set.setdefault(s, []).append(i)
        by_primary.setdefault(s.split("|")[0], []).append(i)
    rng = np.random.default_rng(seed)
    pairs = np.empty((len(labels), 2), dtype=np.int64)
    everyone = list(range(len(vecs)))
    for i, ls in enumerate(labels):
        pool = by_set.get("|".join(ls)) or by_primary.get(ls[0]) or everyone
        pairs[i] = rng.choice(pool, 2)
    out = (vecs[pairs[:, 0]] + vecs[pairs[:, 1]]) / 2  # [N, d]
    out += rng.standard_normal(out.shape, dtype=np.float32) * (noise / np.sqrt(out.shape[1]))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def widen(x: np.ndarray, dim: int, noise: float, seed: int = 0) -> np.ndarray:
    """[N, d] unit rows → [N, dim]: through a fixed random isometry (cosines kept, rows still unit),
    plus Gaussian noise of norm `noise` in the wide space, renormalised. Blocks of 8,192 rows."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((dim, x.shape[1])))  # [dim, d], orthonormal columns
    q = q.astype(np.float32)
    out = np.empty((len(x), dim), dtype=np.float32)
    for start in range(0, len(x), 8192):
        block = x[start:start + 8192] @ q.T  # [b, dim]
        block += rng.standard_normal(block.shape, dtype=np.float32) * (noise / np.sqrt(dim))
        out[start:start + 8192] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def make_donors(path: Path, n: int = 2000) -> None:
    """The n notes embedded in this process as a default embedding run embeds them, with their labels."""
    import torch

    from services.embedder.encoder import embed_texts
    from services.embedder.models import load_model

    notes = list(generate_notes(n, seed=0))
    t0 = time.perf_counter()
    lm = load_model("default", device=torch.device("cpu"), dtype=torch.float32)
    vectors = embed_texts(lm, [note.text for note in notes]).vectors
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors.astype(np.float32), labels=np.array(["|".join(x.labels) for x in notes]))
    print(f"donors: {n} notes embedded in {time.perf_counter() - t0:.0f} s → {path}", flush=True)


def make_query_model(path: Path, dim: int) -> None:
    """A BERT of hidden size `dim` (2 layers, random weights, seed 0) with MiniLM's tokenizer: a query
    model of the right width for imported vectors of `dim` dimensions, nothing more."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from services.embedder.models import default_model_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model_path(), local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=dim, num_hidden_layers=2,
                        num_attention_heads=max(1, dim // 64), intermediate_size=4 * dim, max_position_embeddings=512)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    print(f"query model: BERT, hidden size {dim}, 2 layers, random weights → {path}", flush=True)


def save_donors(dep: Deployment, run: dict, labels: list[list[str]], path: Path) -> None:
    """The computed run's real vectors (its shards, in dataset order) and each note's labels."""
    vectors = np.concatenate([np.load(urlparse(s["uri"]).path) for s in run["result"]["shards"]]).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors, labels=np.array(["|".join(ls) for ls in labels]))


# -- the stages ---------------------------------------------------------------------------
