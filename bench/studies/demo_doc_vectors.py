"""The demo's default `document_vectors: "segments"` against notes read whole → bench/studies/results/demo-document-vectors.json.

`prisma demo` makes each note's vector the weighted mean of its clauses' (services/embedder/segments.py:
mean_of_segments) instead of passing the note through the model (about a third of the embedding time,
bench/results/demo.json). The note vectors enter the SAE's training (its segments and documents) and so
every feature, name, probe and expression after it. Measured here on bench/status.py's demo set, split and
cached vectors (e5-small fp32), three SAE seeds each way: the clause probe (`probe_segments`) and the
expression written from the label search (`expression_scoped`, bench/status_expression.py), with the
words-alone baselines of the same split beside them (TF-IDF + LR, the regex with cues). Text search both
ways: bench/results/text-search.json.

    PYTHONPATH=. python bench/studies/demo_doc_vectors.py [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import doc_vectors as dv  # noqa: E402
import status  # noqa: E402
from status_data import demo_regex_cues, demo_set  # noqa: E402
from status_expression import run_expression  # noqa: E402

from gateway.domain.concepts.probe import heldout_split  # noqa: E402

OUT = ROOT / "bench/studies/results/demo-document-vectors.json"
SEEDS = (0, 1, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (an SAE depends on them)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    ds = demo_set()
    x_doc, x_mean, costs, seg = dv.segment_docs(ds)
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    report: dict[str, Any] = {
        "benchmark": "demo-document-vectors", "model": status.MODEL_NAME[0], "precision": "fp32",
        "threads": args.threads, "data": ds.description | {"split": "stratified, 25 % held out, seed 0"},
        "baselines": {"tfidf_lr": status.run_tfidf(ds, split)["f1"],
                      "regex_cues": status.run_regex(ds, split, demo_regex_cues)["f1"]},
    }
    for name, x in (("encoded", x_doc), ("segments", x_mean)):
        runs = []
        for seed in SEEDS:
            out: dict = {}
            pooled: list = []
            probe = status.segment_probe(x, seg, ds, split, out, keep=pooled, seed=seed)
            expression = run_expression(ds, split, seg, pooled[0], out)
            runs.append({"seed": seed, "probe_segments": probe["f1"], "expression_scoped": expression["f1"],
                         "expression": out["expression_scoped"]["expression"],
                         "reliable_names": out["naming"]["reliable"]})
            print(name, runs[-1], flush=True)
        report[name] = {"runs": runs, **{f"{k}_mean": dv._r(np.mean([r[k] for r in runs]))
                                         for k in ("probe_segments", "expression_scoped")}}
    dv.write_report(report, t0, OUT)


if __name__ == "__main__":
    main()
