"""Embedding throughput: Prisma's chunk-and-average encoder against sentence-transformers' `encode`.

Same model (all-MiniLM-L6-v2), same documents, same torch threads, same process, warm-up
for both, runs interleaved. tokens/s counts the tokens each one actually fed the model
(Prisma: every token of every document plus each chunk's specials; sentence-transformers:
what is left after truncating at 256). Also docs/s, peak RSS, and, when the bf16 path is
measured, its cosine with fp32 over all documents (it is allowed only if >= 0.999).

    python bench/embed.py [--data CSV] [--limit 1000] [--threads N] [--repeats 2]

Writes bench/results/embed.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import numpy as np
import psutil
import torch

from services.embedder.encoder import configure_threads, default_batch_tokens, embed_texts
from services.embedder.models import cpu_has_native_bf16, default_threads, load_model, select_dtype

REPO = Path(__file__).resolve().parents[1]


def read_texts(path: Path, limit: int) -> list[str]:
    """The first `limit` abstracts of the medical-abstracts CSV (read in place, never copied)."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return [row["medical_abstract"] for _, row in zip(range(limit), reader)]


class PeakRss:
    """Peak resident memory of this process while the block runs (sampled every 5 ms)."""

    def __enter__(self) -> Self:
        self._proc = psutil.Process()
        self.before = self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def timed(fn: Callable[[], int], n_docs: int) -> dict[str, float]:
    """Run `fn` (returns tokens fed) once: seconds, tokens/s, docs/s, peak RSS."""
    with PeakRss() as mem:
        start = time.perf_counter()
        tokens = fn()
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "docs_per_s": n_docs / seconds,
        "peak_rss_mib": mem.peak / 2**20, "peak_rss_increase_mib": (mem.peak - mem.before) / 2**20,
    }


def summarise(runs: list[dict[str, float]]) -> dict[str, object]:
    """Median over the repeats (the machine is shared), with every run kept."""
    keys = ("seconds", "tokens_per_s", "docs_per_s", "peak_rss_mib", "peak_rss_increase_mib")
    out: dict[str, object] = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["tokens"] = runs[0]["tokens"]
    out["runs"] = runs
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared/data/medical-abstracts/medical_tc_test.csv")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all CPUs)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-tokens", type=int, default=None)
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/embed.json")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    threads = configure_threads(args.threads)
    texts = read_texts(args.data, args.limit)
    cpu = torch.device("cpu")
    fp32 = load_model(None, device=cpu, dtype=torch.float32)
    auto_dtype = select_dtype("auto", cpu)
    variants = {"prisma_fp32": fp32}
    if auto_dtype != torch.float32:
        variants["prisma_bf16"] = load_model(None, device=cpu, dtype=auto_dtype)
    st = SentenceTransformer(fp32.path, device="cpu")
    batch_tokens = args.batch_tokens or default_batch_tokens(cpu)

    st_lengths = [len(x) for x in st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]]
    full_lengths = [len(x) + fp32.n_special for x in fp32.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]
    over = sum(n > fp32.max_length for n in full_lengths)

    def run_st(sub: list[str] = texts) -> int:
        st.encode(sub, batch_size=32, convert_to_numpy=True)
        return sum(st_lengths) if sub is texts else 0

    def runner(lm) -> Callable[..., int]:
        def run(sub: list[str] = texts) -> int:
            return int(embed_texts(lm, sub, batch_tokens=batch_tokens).n_tokens.sum())
        return run

    systems = {"sentence_transformers": run_st, **{k: runner(v) for k, v in variants.items()}}
    for fn in systems.values():  # warm-up: allocator, oneDNN kernels, tokenizer caches
        fn(texts[:64])
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in systems}
    for r in range(args.repeats):
        for name, fn in systems.items():
            runs[name].append(timed(fn, len(texts)))
            print(f"repeat {r}: {name}: {runs[name][-1]['tokens_per_s']:.0f} tokens/s, "
                  f"{runs[name][-1]['docs_per_s']:.1f} docs/s", flush=True)

    results = {k: summarise(v) for k, v in runs.items()}
    st_tps = results["sentence_transformers"]["tokens_per_s"]
    default_name = "prisma_bf16" if "prisma_bf16" in variants else "prisma_fp32"
    report: dict[str, object] = {
        "benchmark": "embed",
        "data": {"path": str(args.data.resolve()), "documents": len(texts),
                 "over_window_fraction": over / len(texts), "window": fp32.max_length,
                 "tokens_all": sum(full_lengths), "tokens_truncated_256": sum(st_lengths)},
        "model": {"name": "all-MiniLM-L6-v2", "path": fp32.path, "dim": fp32.dim, "max_length": fp32.max_length},
        "settings": {"threads": threads, "batch_tokens": batch_tokens, "st_batch_size": 32,
                     "repeats": args.repeats, "statistic": "median of repeats", "prisma_default": default_name},
        "results": results,
        "ratio_tokens_per_s": results[default_name]["tokens_per_s"] / st_tps,
        "ratio_tokens_per_s_fp32": results["prisma_fp32"]["tokens_per_s"] / st_tps,
        "ratio_docs_per_s": results[default_name]["docs_per_s"] / results["sentence_transformers"]["docs_per_s"],
        "machine": machine_info(threads),
    }
    if "prisma_bf16" in variants:
        a = embed_texts(fp32, texts, batch_tokens=batch_tokens).vectors
        b = embed_texts(variants["prisma_bf16"], texts, batch_tokens=batch_tokens).vectors
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        report["bf16_vs_fp32_cosine"] = {"min": float(cos.min()), "mean": float(cos.mean()),
                                         "p01": float(np.quantile(cos, 0.01)), "allowed": bool(cos.min() >= 0.999)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("ratio_tokens_per_s", "ratio_tokens_per_s_fp32", "ratio_docs_per_s")}))


def machine_info(threads: int) -> dict[str, object]:
    import sentence_transformers
    import transformers

    return {
        "cpu_count": os.cpu_count(), "usable_cpus": default_threads(), "torch_threads": threads,
        "cpu": platform.processor() or platform.machine(), "cpu_native_bf16": cpu_has_native_bf16(),
        "load_average_1m_at_end": os.getloadavg()[0], "torch": torch.__version__,
        "transformers": transformers.__version__, "sentence_transformers": sentence_transformers.__version__,
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    main()
