"""The CPU token budget of one forward batch (`encoder.CPU_BATCH_TOKENS`): microseconds per token of the
default model's encoder at 1,024 to 8,192 padded tokens a batch, for each precision this CPU runs, on long
chunks (256 tokens, like notes) and short ones (16, like clauses); then the whole `embed_texts` on demo
notes and their distinct clauses at the two budgets that matter (the default 8,192 and 4,096),
interleaved. Vectors do not depend on the budget (a text alone gets bit for bit its vector in any batch),
so only the time is measured.

    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
        python bench/studies/batch_tokens.py --out bench/studies/results/batch-tokens-avx2.json
    python bench/studies/batch_tokens.py          # this CPU uncapped (bf16 too where it is native)

Writes bench/studies/results/batch-tokens.json (or --out).
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
from bench.demo import ISA_CAPS, cpu_report  # noqa: E402
from bench.embed import demo_notes, segments_of  # noqa: E402
from services.embedder.distinct import distinct_texts  # noqa: E402
from services.embedder.encoder import configure_threads, embed_texts  # noqa: E402
from services.embedder.models import cpu_has_native_bf16, load_model  # noqa: E402

MODEL = "multilingual-e5-small"
ROWS = (1024, 2048, 4096, 8192)
LENGTHS = (256, 16)


def per_token_us(model: torch.nn.Module, length: int, rows: int, calls: int) -> float:
    """Median microseconds per token of `calls` forward passes over [rows // length, length] random ids."""
    ids = torch.randint(5, 200_000, (rows // length, length), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask)  # warm-up: allocator and kernels for this shape
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            model(input_ids=ids, attention_mask=mask)
            times.append(time.perf_counter() - t)
    return float(np.median(times)) / (ids.numel()) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over every cell, interleaved")
    parser.add_argument("--calls", type=int, default=3, help="forward passes a cell per round")
    parser.add_argument("--notes", type=int, default=150, help="demo notes for the end-to-end check")
    parser.add_argument("--out", type=Path, default=Path("bench/studies/results/batch-tokens.json"))
    args = parser.parse_args()
    threads = configure_threads(None)
    capped = any(os.environ.get(k) for k in ISA_CAPS)
    precisions = ["fp32", "int8"] + (["bf16"] if cpu_has_native_bf16() and not capped else [])
    cpu = torch.device("cpu")
    models = {"fp32": load_model(MODEL, device=cpu), "int8": load_model(MODEL, device=cpu, int8=True)}
    if "bf16" in precisions:
        models["bf16"] = load_model(MODEL, device=cpu, dtype=torch.bfloat16)

    cells: dict[str, dict[str, list[float]]] = {p: {} for p in precisions}
    for _ in range(args.repeats):
        for p in precisions:
            for length in LENGTHS:
                for rows in ROWS:
                    cells[p].setdefault(f"{length}x{rows}", []).append(
                        per_token_us(models[p].model, length, rows, args.calls))
    micro = {p: {cell: {"us_per_token_min": round(min(v), 1), "us_per_token_median": round(float(np.median(v)), 1)}
                 for cell, v in per.items()} for p, per in cells.items()}
    best = {p: {str(length): min(ROWS, key=lambda r: micro[p][f"{length}x{r}"]["us_per_token_min"]) for length in LENGTHS}
            for p in precisions}

    notes = demo_notes(args.notes)
    segments = distinct_texts(models["fp32"], segments_of(notes)).texts
    texts = {"notes": notes, "segments": segments}
    end_to_end: dict[str, dict[str, dict[str, list[float]]]] = {}
    for p in ("int8", "fp32"):
        for _ in range(2):
            for budget in (8192, 4096):
                for name, batch in texts.items():
                    t = time.perf_counter()
                    embed_texts(models[p], batch, batch_tokens=budget)
                    end_to_end.setdefault(p, {}).setdefault(name, {}).setdefault(str(budget), []).append(
                        round(time.perf_counter() - t, 2))
    ratios = {p: {name: round(min(per["8192"]) / min(per["4096"]), 3) for name, per in sets.items()}
              for p, sets in end_to_end.items()}
    report = {
        "benchmark": "batch_tokens",
        "model": MODEL,
        "cpu": cpu_report(threads),
        "settings": {"rows": ROWS, "lengths": LENGTHS, "repeats": args.repeats, "calls": args.calls,
                     "statistic": "per cell: the median of `calls` passes, per round; min and median over rounds"},
        "microseconds_per_token": micro,
        "best_rows": best,
        "end_to_end_seconds": {"texts": {k: len(v) for k, v in texts.items()}, "by_precision": end_to_end},
        "speedup_4096_over_8192": ratios,
        "load_average_1m_at_end": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"best_rows": best, "speedup_4096_over_8192": ratios}, indent=1))


if __name__ == "__main__":
    main()
