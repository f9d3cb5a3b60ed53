"""Embedding throughput and int8 quality: Prisma's encoder (fp32, and int8 on its two engines) against
sentence-transformers' `encode` (fp32) on the same model (the default multilingual-e5-small
directory), the same texts, in one process, warm-up for all, runs interleaved.

Texts: `--notes` demo notes (documents) and their *distinct* segments (clauses): texts without
repeats, so the ratios measure the engine alone. tokens/s counts the tokens each one actually fed
the model (Prisma: every token plus each chunk's specials and prompt; sentence-transformers: what
is left after truncating at its max_seq_length, prompt included). The headline ratios are over
both sets together (total tokens / total seconds: the demo's embedding work), with each set's
apart. Apart again, the saving of embedding each distinct segment once, on the whole demo corpus
(`--corpus-notes`): segments / distinct segments, and the same by tokens. Quality: cosine of
Prisma int8 to Prisma fp32 on the notes, the distinct segments and the NegEx sentences.

`prisma_int8` is the product's int8 (the CTranslate2 engine, services/embedder/ct2.py);
`prisma_int8_torch` is torch's int8 layers (services/embedder/int8.py, the fallback engine), measured
beside it so the two engines' speed and quality compare in one run.

    nice python bench/embed.py [--notes 200] [--corpus-notes 2000] [--repeats 2] [--threads N]

Writes bench/results/embed.json.
"""

from __future__ import annotations

import argparse
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

from services.embedder.distinct import distinct_texts
from services.embedder.encoder import configure_threads, default_batch_tokens, embed_texts
from services.embedder.models import cpu_has_native_bf16, default_threads, load_model
from services.embedder.segments import segment_spans

REPO = Path(__file__).resolve().parents[1]
MODEL = "multilingual-e5-small"
NEGEX = Path("/work/shared/data/negex/rsAnnotations-1-120-random.txt")


def demo_notes(n: int) -> list[str]:
    from gateway.demo.corpus import generate_notes

    return [note.text for _, note in zip(range(n), generate_notes(n))]


def segments_of(notes: list[str]) -> list[str]:
    doc, start, end = segment_spans(notes)
    return [notes[d][a:b] for d, a, b in zip(doc.tolist(), start.tolist(), end.tolist())]


def negex_sentences(path: Path = NEGEX) -> list[str]:
    """The NegEx test set's sentences (read in place; its order is already random)."""
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[2] for line in lines if line.count("\t") >= 3]


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


def interleaved(systems: dict[str, Callable[[list[str]], int]], sets: dict[str, list[str]], repeats: int,
                timer: Callable[[Callable[[], int], int], dict[str, float]] = timed) -> dict[str, dict[str, list]]:
    """Every system on every set, `repeats` rounds, interleaved (each round runs them all, so all see the
    same machine load): {set: {system: [the timer's dict per round]}}."""
    runs: dict[str, dict[str, list]] = {s: {k: [] for k in systems} for s in sets}
    for r in range(repeats):
        for set_name, texts in sets.items():
            for name, fn in systems.items():
                runs[set_name][name].append(timer(lambda fn=fn, texts=texts: fn(texts), len(texts)))
                print(f"repeat {r}: {set_name}: {name}: {runs[set_name][name][-1]['tokens_per_s']:.0f} tokens/s",
                      flush=True)
    return runs


def summarise(runs: list[dict[str, float]]) -> dict[str, object]:
    """Median over the repeats (the machine is shared), with every run kept."""
    keys = ("seconds", "tokens_per_s", "docs_per_s", "peak_rss_mib", "peak_rss_increase_mib")
    out: dict[str, object] = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["tokens"] = runs[0]["tokens"]
    out["runs"] = runs
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Cosine of each row of `a` [N, d] with its row of `b`: median, 5th percentile, minimum."""
    c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return {"median": float(np.median(c)), "p5": float(np.quantile(c, 0.05)), "min": float(c.min()), "n": len(c)}


def distinct_saving(lm, notes: list[str]) -> dict[str, float]:  # noqa: ANN001
    """What embedding each distinct segment once saves on `notes`: by segments and by tokens."""
    segs = segments_of(notes)
    found = distinct_texts(lm, segs)
    tokens = np.array([len(x) for x in lm.tokenizer(segs, add_special_tokens=False, verbose=False)["input_ids"]])
    per_distinct = np.zeros(len(found.texts), dtype=np.int64)
    per_distinct[found.inverse] = tokens
    n_special = lm.n_special
    return {"notes": len(notes), "segments": len(segs), "distinct_segments": len(found.texts),
            "segments_per_distinct": len(segs) / len(found.texts),
            "tokens_all": int(tokens.sum() + n_special * len(segs)),
            "tokens_distinct": int(per_distinct.sum() + n_special * len(found.texts)),
            "saving_by_tokens": float((tokens.sum() + n_special * len(segs))
                                      / (per_distinct.sum() + n_special * len(found.texts)))}


def combined(results: dict[str, dict[str, dict]], system: str) -> float:
    """tokens/s over every set: total tokens / total (median) seconds."""
    parts = [results[s][system] for s in results]
    return sum(p["tokens"] for p in parts) / sum(p["seconds"] for p in parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=200, help="demo notes timed (and their distinct segments)")
    parser.add_argument("--corpus-notes", type=int, default=2000, help="demo notes for the distinct-segment saving")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all CPUs)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--negex", type=int, default=None, help="NegEx sentences for the quality (default: all)")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/embed.json")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    load_start = os.getloadavg()
    threads = configure_threads(args.threads)
    cpu = torch.device("cpu")
    fp32 = load_model(MODEL, device=cpu)
    int8 = load_model(MODEL, device=cpu, int8=True, threads=threads)
    int8_torch = load_model(MODEL, device=cpu, int8=True, int8_engine="torch")
    assert int8.engine == "ctranslate2" and int8_torch.engine == "torch"
    st = SentenceTransformer(fp32.path, device="cpu")
    batch_tokens = default_batch_tokens(cpu)
    notes = demo_notes(args.notes)
    sets = {"documents": notes, "segments": distinct_texts(fp32, segments_of(notes)).texts}
    prompt = fp32.prompt_text or ""

    def st_tokens(texts: list[str]) -> int:
        enc = st.tokenizer([prompt + t for t in texts], truncation=True, max_length=st.max_seq_length)
        return sum(len(x) for x in enc["input_ids"])

    def st_run(texts: list[str]) -> int:
        st.encode(texts, batch_size=32, convert_to_numpy=True, prompt=prompt or None)
        return st_tokens(texts)

    def prisma(lm) -> Callable[[list[str]], int]:  # noqa: ANN001
        return lambda texts: int(embed_texts(lm, texts, batch_tokens=batch_tokens).n_tokens.sum())

    systems = {"st_fp32": st_run, "prisma_fp32": prisma(fp32), "prisma_int8": prisma(int8),
               "prisma_int8_torch": prisma(int8_torch)}
    for fn in systems.values():  # warm-up: allocator, oneDNN/fbgemm kernels, tokenizer caches
        fn(notes[:16] + sets["segments"][:64])
    runs = interleaved(systems, sets, args.repeats)
    results = {s: {k: summarise(v) for k, v in per.items()} for s, per in runs.items()}
    st_all = combined(results, "st_fp32")
    ratios: dict[str, object] = {
        "int8_vs_st_fp32_tokens_per_s": combined(results, "prisma_int8") / st_all,
        "fp32_vs_st_fp32_tokens_per_s": combined(results, "prisma_fp32") / st_all,
        "int8_torch_vs_st_fp32_tokens_per_s": combined(results, "prisma_int8_torch") / st_all,
        "by_set": {s: {"int8_vs_st_fp32_tokens_per_s": r["prisma_int8"]["tokens_per_s"] / r["st_fp32"]["tokens_per_s"],
                       "fp32_vs_st_fp32_tokens_per_s": r["prisma_fp32"]["tokens_per_s"] / r["st_fp32"]["tokens_per_s"],
                       "int8_torch_vs_st_fp32_tokens_per_s":
                           r["prisma_int8_torch"]["tokens_per_s"] / r["st_fp32"]["tokens_per_s"]}
                   for s, r in results.items()},
    }
    saving = distinct_saving(fp32, demo_notes(args.corpus_notes))
    ratios["distinct_segments_saving"] = saving["segments_per_distinct"]
    ratios["distinct_segments_saving_by_tokens"] = saving["saving_by_tokens"]
    quality_sets = {**sets, "negex": negex_sentences()[: args.negex]}
    reference = {s: embed_texts(fp32, t).vectors for s, t in quality_sets.items()}
    quality = {s: cosines(reference[s], embed_texts(int8, t).vectors) for s, t in quality_sets.items()}
    quality_torch = {s: cosines(reference[s], embed_texts(int8_torch, t).vectors) for s, t in quality_sets.items()}
    report = {
        "benchmark": "embed",
        "model": {"name": MODEL, "path": fp32.path, "dim": fp32.dim, "max_length": fp32.max_length,
                  "prompt": prompt, "st_max_seq_length": st.max_seq_length},
        "data": {"documents": len(notes), "distinct_segments": len(sets["segments"]),
                 "tokens": {s: results[s]["prisma_fp32"]["tokens"] for s in sets}, "distinct_saving": saving},
        "settings": {"threads": threads, "batch_tokens": batch_tokens, "st_batch_size": 32, "repeats": args.repeats,
                     "statistic": "median of repeats; combined = total tokens / total seconds"},
        "ratios": ratios,
        "quality": {"int8_cosine_p5": min(q["p5"] for q in quality.values()),
                    "int8_cosine_median": min(q["median"] for q in quality.values()), "by_set": quality,
                    "int8_engine": int8.engine,
                    "torch_int8": {"int8_cosine_p5": min(q["p5"] for q in quality_torch.values()),
                                   "int8_cosine_median": min(q["median"] for q in quality_torch.values()),
                                   "by_set": quality_torch}},
        "results": results,
        "machine": machine_info(threads) | {"load_average_1m_at_start": load_start[0]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"ratios": ratios, "quality": report["quality"]["int8_cosine_p5"]}, indent=1))

def cpu_flags() -> list[str]:
    """The CPU's vector and matrix extensions that matter here (Linux)."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return []
    return [f for f in wanted if f in flags]


def _version_of(package: str) -> str | None:
    """An installed package's version, None where it is absent (a lent GPU machine has no ctranslate2)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def machine_info(threads: int) -> dict[str, object]:
    import sentence_transformers
    import transformers

    return {
        "cpu_count": os.cpu_count(), "usable_cpus": default_threads(), "torch_threads": threads,
        "cpu": platform.processor() or platform.machine(), "cpu_native_bf16": cpu_has_native_bf16(),
        "cpu_flags": cpu_flags(),
        "load_average_1m_at_end": os.getloadavg()[0], "torch": torch.__version__,
        "transformers": transformers.__version__, "sentence_transformers": sentence_transformers.__version__,
        "ctranslate2": _version_of("ctranslate2"),
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    main()
