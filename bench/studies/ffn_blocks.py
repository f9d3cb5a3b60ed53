"""The encoder's feed-forward in row blocks (`services/embedder/int8.py: RowBlocks`) against the whole
batch at once: tokens/s of forward passes over *real* full batches of the demo, bit for bit the same
output, on this CPU.

At the CPU budget of 8,192 tokens a batch, a layer's [tokens, 1536] float32 intermediates are 50 MB,
above glibc's largest mmap threshold (32 MB), so each is a fresh mapping whose pages fault in on
first touch; in blocks of 2,048 rows they are 12.6 MB and come back from the heap. The batches are
the demo's own (2,000 notes and their distinct clauses, tokenized, chunked and packed exactly as an
embedding run packs them), the ones of 7,000 padded tokens or more (91 % of the notes' tokens and
73 % of the clauses' are in such batches), `--batches` of each drawn at random; every cell runs
them all, cells interleaved over `--rounds`. Run from the repository root:

    python bench/studies/ffn_blocks.py [--batches 6] [--rounds 3]

Writes bench/studies/results/ffn-blocks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from the repository root
from bench.demo import cpu_report  # noqa: E402
from bench.embed import demo_notes, segments_of  # noqa: E402
from services.embedder.chunking import chunk_token_windows, pack_batches, padded_length  # noqa: E402
from services.embedder.distinct import distinct_texts  # noqa: E402
from services.embedder.encoder import CPU_BATCH_TOKENS, Batch, build_batch, configure_threads, tokenize_texts  # noqa: E402
from services.embedder.int8 import FFN_BLOCK_ROWS, RowBlocks, block_feed_forwards  # noqa: E402
from services.embedder.models import LoadedModel, load_model  # noqa: E402

MODEL = "multilingual-e5-small"
WHOLE = 1 << 30  # rows per block: the whole batch at once


def full_batches(lm: LoadedModel, texts: list[str], n: int, rng: np.random.Generator) -> list[Batch]:
    tok = tokenize_texts(lm, texts)
    plan = chunk_token_windows(tok.n_tokens, lm.window)
    widths = np.minimum(padded_length(plan.lengths + lm.n_special), lm.max_length)
    batches = [i for i in pack_batches(widths, batch_tokens=CPU_BATCH_TOKENS, max_batch_size=1024)
               if len(i) * widths[i[0]] >= 7000]
    return [build_batch(lm, tok, plan, batches[j], "mean", seq_width=int(widths[batches[j][0]]))
            for j in rng.choice(len(batches), min(n, len(batches)), replace=False)]


def set_rows(model: torch.nn.Module, rows: int) -> None:
    for layer in model.modules():
        if isinstance(getattr(layer, "feed_forward_chunk", None), RowBlocks):
            layer.feed_forward_chunk.rows = rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=6, help="full batches of each kind")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/studies/results/ffn-blocks.json"))
    args = parser.parse_args()
    threads = configure_threads(None)
    cpu = torch.device("cpu")
    models = {"int8": load_model(MODEL, device=cpu, int8=True), "fp32": load_model(MODEL, device=cpu)}
    block_feed_forwards(models["fp32"].model)  # the fp32 model's too, for the comparison only
    notes = demo_notes(2000)
    rng = np.random.default_rng(0)
    sets = {"notes": full_batches(models["fp32"], notes, args.batches, rng),
            "clauses": full_batches(models["fp32"], distinct_texts(models["fp32"], segments_of(notes)).texts,
                                    args.batches, rng)}
    rates: dict[str, list[float]] = {}
    same: dict[str, bool] = {}
    reference: dict[str, list[torch.Tensor]] = {}  # each kind's whole-batch outputs, this round
    with torch.inference_mode():
        for _ in range(args.rounds):
            for precision, lm in models.items():
                for rows in (WHOLE, FFN_BLOCK_ROWS):
                    set_rows(lm.model, rows)
                    for name, batches in sets.items():
                        tokens, start, outputs = 0, time.perf_counter(), []
                        for batch in batches:
                            outputs.append(lm.model(input_ids=batch.input_ids,
                                                    attention_mask=batch.attention_mask).last_hidden_state)
                            tokens += batch.input_ids.numel()
                        cell = f"{precision}/{name}/{'whole' if rows == WHOLE else 'blocks'}"
                        rates.setdefault(cell, []).append(tokens / (time.perf_counter() - start))
                        key = f"{precision}/{name}"
                        if rows == WHOLE:
                            reference[key] = outputs
                        else:
                            same[key] = same.get(key, True) and all(
                                torch.equal(a, b) for a, b in zip(reference[key], outputs, strict=True))
                        print(cell, f"{rates[cell][-1]:.0f} tokens/s", flush=True)
    median = {cell: round(float(np.median(v)), 1) for cell, v in rates.items()}
    speedup = {key: round(median[f"{key}/blocks"] / median[f"{key}/whole"], 3) for key in same}
    report = {
        "benchmark": "ffn_blocks",
        "model": MODEL,
        "cpu": cpu_report(threads),
        "settings": {"block_rows": FFN_BLOCK_ROWS, "batch_tokens": CPU_BATCH_TOKENS, "rounds": args.rounds,
                     "batches": {name: [list(b.input_ids.shape) for b in batches] for name, batches in sets.items()},
                     "statistic": "tokens/s (padded) over all the batches of a kind, per round; median over rounds"},
        "tokens_per_s": {cell: {"median": median[cell], "rounds": [round(r, 1) for r in v]} for cell, v in rates.items()},
        "speedup_blocks_over_whole": speedup,
        "bit_identical": same,
        "load_average_1m_at_end": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"speedup_blocks_over_whole": speedup, "bit_identical": same}, indent=1))


if __name__ == "__main__":
    main()
