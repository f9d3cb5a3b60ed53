"""What padding each chunk to a width of its own length costs (`chunking.padded_length`, batches of
one width) against the packing before it (batches sorted by length, padded to their longest).

On the demo corpus (generated Italian notes, seed 0) and on its segments: tokens fed to the model
(padding included) for both packings at the default batch budget, and embedding seconds for both,
interleaved, same model, same precision, same threads; also the largest difference between a
text embedded alone and in the batch (the reason for the change).

    nice -n 19 python bench/studies/padding.py [--notes 400] [--repeats 3] [--precision bf16] [--threads 1]

Writes bench/studies/results/padding.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from gateway.demo.corpus import generate_notes
from services.embedder import encoder
from services.embedder.chunking import chunk_token_windows, pack_batches, padded_length
from services.embedder.encoder import (
    configure_threads,
    default_batch_tokens,
    embed_texts,
    tokenize_texts,
)
from services.embedder.models import load_model, select_dtype
from services.embedder.segments import segment_spans

REPO = Path(__file__).resolve().parents[2]


def pack_longest_first(seq_lengths: np.ndarray, *, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """The packing before: sorted longest first, each batch padded to its first member."""
    lengths = np.asarray(seq_lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    batches, i = [], 0
    while i < len(order):
        size = max(1, min(max_batch_size, batch_tokens // int(lengths[order[i]])))
        batches.append(order[i : i + size])
        i += size
    return batches


def fed_tokens(lm, texts: list[str], batch_tokens: int) -> dict[str, int]:
    tok = tokenize_texts(lm, texts)
    seq = chunk_token_windows(tok.n_tokens, lm.window).lengths + lm.n_special
    widths = np.minimum(padded_length(seq), lm.max_length)
    before = sum(len(b) * int(seq[b].max()) for b in pack_longest_first(seq, batch_tokens=batch_tokens,
                                                                        max_batch_size=1024))
    after = sum(len(b) * int(widths[b[0]]) for b in pack_batches(widths, batch_tokens=batch_tokens,
                                                               max_batch_size=1024))
    batches_before = len(pack_longest_first(seq, batch_tokens=batch_tokens, max_batch_size=1024))
    batches_after = len(pack_batches(widths, batch_tokens=batch_tokens, max_batch_size=1024))
    return {"real_tokens": int(seq.sum()), "fed_before": int(before), "fed_after": int(after),
            "padding_before": round(before / seq.sum() - 1, 4), "padding_after": round(after / seq.sum() - 1, 4),
            "batches_before": batches_before, "batches_after": batches_after}


def embed_before(lm, texts: list[str]) -> np.ndarray:
    with mock.patch.object(encoder, "padded_length", lambda n: np.asarray(n)), \
            mock.patch.object(encoder, "pack_batches", pack_longest_first):
        return embed_texts(lm, texts).vectors


def seconds(fn, texts: list[str]) -> float:
    start = time.perf_counter()
    fn(texts)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench/studies/results/padding.json")
    args = parser.parse_args()
    configure_threads(args.threads)
    device = torch.device("cpu")
    dtype = select_dtype(args.precision, device)
    lm = load_model(None, device=device, dtype=dtype)
    notes = [n.text for n in generate_notes(n=args.notes, seed=0)]
    doc, start, end = segment_spans(notes)
    segments = [notes[d][a:b] for d, a, b in zip(doc.tolist(), start.tolist(), end.tolist())]
    budget = default_batch_tokens(device)
    result: dict[str, object] = {
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip(),
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": args.threads,
                    "dtype": str(dtype).removeprefix("torch.")},
        "notes": args.notes, "batch_tokens": budget,
    }
    for name, texts in (("documents", notes), ("segments", segments)):
        after = embed_texts(lm, texts).vectors
        before = embed_before(lm, texts)
        alone_before = np.stack([embed_before(lm, [t])[0] for t in texts[:50]])
        alone = np.stack([embed_texts(lm, [t]).vectors[0] for t in texts[:50]])
        timings: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.repeats):  # interleaved
            timings["before"].append(seconds(lambda t: embed_before(lm, t), texts))
            timings["after"].append(seconds(lambda t: embed_texts(lm, t), texts))
        result[name] = {
            "texts": len(texts), **fed_tokens(lm, texts, budget),
            "seconds_before_median": round(statistics.median(timings["before"]), 3),
            "seconds_after_median": round(statistics.median(timings["after"]), 3),
            "seconds_before": [round(x, 3) for x in timings["before"]],
            "seconds_after": [round(x, 3) for x in timings["after"]],
            "alone_vs_batch_max_abs_before": float(np.abs(before[:50] - alone_before).max()),
            "alone_vs_batch_max_abs_after": float(np.abs(after[:50] - alone).max()),
        }
        print(name, json.dumps(result[name]))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
