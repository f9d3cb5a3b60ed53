"""The SAE run's pairwise statistics (`services/sae/stats.pairwise`: co-occurrence C and activation
similarity D) by scipy's sparse products against dense BLAS products per block, on document codes of the
demo's shape: each document's codes the max over its clauses' TopK codes (2,000 documents, ~36 clauses
each, n = 3,072, k = 32), and on plain TopK codes (one row a document, k = 32) where the sparse path stays.
Codes are drawn with a power-law feature frequency, as SAE features fire. Both paths' results are compared
(C exactly, D to float32 rounding); seconds are medians of `--repeats`, the two paths interleaved.

    python bench/sae_stats.py [--repeats 3]

Writes bench/results/sae-stats.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repository root
from bench.demo import ISA_CAPS  # noqa: E402
from contracts.sae import StatsConfig  # noqa: E402
from contracts.sparse import max_pool_rows  # noqa: E402
from services.sae.stats import DENSE_GAIN, dense_is_cheaper, pairwise  # noqa: E402


def topk_codes(rows: int, n: int, k: int, rng: np.random.Generator) -> sp.csr_matrix:
    """[rows, n] codes, k features a row drawn with frequency ∝ 1 / rank, activations uniform (0.05, 1)."""
    p = 1.0 / np.arange(1, n + 1)
    p /= p.sum()
    idx = np.stack([rng.choice(n, k, replace=False, p=p) for _ in range(rows)])
    acts = rng.uniform(0.05, 1.0, (rows, k)).astype(np.float32)
    return sp.csr_matrix((acts.ravel(), idx.ravel(), np.arange(0, rows * k + 1, k)), shape=(rows, n))


def max_pooled(docs: int, per_doc: int, n: int, k: int, rng: np.random.Generator) -> sp.csr_matrix:
    """[docs, n]: each row the max over `per_doc` TopK rows (as a run pools a document's segments)."""
    return max_pool_rows(topk_codes(docs * per_doc, n, k, rng), np.arange(docs * per_doc) // per_doc, docs)


def seconds(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results/sae-stats.json"))
    args = parser.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    rng = np.random.default_rng(0)
    cases = {"documents_max_over_36_clauses": max_pooled(2000, 36, 3072, 32, rng),
             "topk_rows": topk_codes(20000, 3072, 32, rng)}
    cfg = StatsConfig()
    report: dict[str, object] = {"benchmark": "sae_stats", "dense_gain_setting": DENSE_GAIN,
                                 "threads": torch.get_num_threads(),
                                 "isa_caps": {k: os.environ.get(k) for k in ISA_CAPS}, "cases": {}}
    for name, codes in cases.items():
        counts = np.asarray((codes > 0).sum(0)).ravel().astype(np.int64)
        sparse_s, dense_s = [], []
        for _ in range(args.repeats):
            sparse_s.append(seconds(lambda: pairwise(codes, counts, cfg, dense=False)))
            dense_s.append(seconds(lambda: pairwise(codes, counts, cfg, dense=True)))
        a, b = pairwise(codes, counts, cfg, dense=False), pairwise(codes, counts, cfg, dense=True)
        same_c = (np.array_equal(a.cooccurrence.indptr, b.cooccurrence.indptr)
                  and np.array_equal(a.cooccurrence.indices, b.cooccurrence.indices)
                  and np.array_equal(a.cooccurrence.data, b.cooccurrence.data))
        d_rel = float(np.max(np.abs(a.activation_similarity.data - b.activation_similarity.data)
                             / np.maximum(np.abs(a.activation_similarity.data), 1e-12)))
        per_row = np.diff(codes.indptr)
        report["cases"][name] = {  # type: ignore[index]
            "shape": list(codes.shape), "nnz_per_row_mean": round(float(per_row.mean()), 1),
            "density": round(codes.nnz / (codes.shape[0] * codes.shape[1]), 4),
            "sparse_seconds": round(statistics.median(sparse_s), 3), "dense_seconds": round(statistics.median(dense_s), 3),
            "speedup_dense": round(statistics.median(sparse_s) / statistics.median(dense_s), 2),
            "chosen_by_default": "dense" if dense_is_cheaper(codes) else "sparse",
            "cooccurrence_identical": same_c, "activation_similarity_max_relative_difference": d_rel,
        }
    report["load_average_1m_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["cases"], indent=1))


if __name__ == "__main__":
    main()
