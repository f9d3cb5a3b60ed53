"""The demo SAE's batch: 256 rows at the default rule's learning rate against larger batches at a scaled rate.

`prisma demo` trains its SAE on the notes' clauses and the notes (8 passes). A step's cost hardly grows with
its rows (a 2,048-row step costs about 3.4 of 256: the Adam update, the decoder renormalisation and the
gradient projection are per step), so the same passes in larger batches take fewer, cheaper steps. Fewer steps
at the same rate learn less, so the rate is scaled with the batch (linear scaling: 8 × for 8 × the rows) and the
warm-up kept in rows (100 steps of 256 = 13 of 2,048). Measured on bench/status.py's demo set, split, cached
e5 vectors and probe (`segment_probe`: the SAE on the training notes' clauses and notes, a note's codes the max
over its clauses, Prisma's probe on them), SAE seeds 0-2: the probe's held-out F1, the SAE's held-out FVU, the
features that fire on some note, and the SAE stage's seconds (training and the pooled codes); beside them the
regex, regex-with-cues and TF-IDF + LR baselines' F1 on the same split.

    python bench/demo_sae_batch.py            # → bench/results/demo-sae-batch.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import status  # noqa: E402
import torch  # noqa: E402
from status_data import demo_regex, demo_regex_cues, demo_set  # noqa: E402

from contracts.sae import SaeConfig  # noqa: E402
from gateway.cli.demo import DEMO_SAE_BATCH  # noqa: E402
from gateway.domain.concepts.probe import heldout_split  # noqa: E402

RULE_LR = SaeConfig(batch_size=256).resolved_lr(384)  # the default rule at 256 rows for n = 3,072 (384 × 8)
CONFIGS = {
    "batch 256, the rule's rate (the demo until 2026-12-01)": {},
    "batch 1,024, rate 3e-3 (bench/status.py's), warm-up 25": {"batch_size": 1024, "lr": 3e-3, "lr_warmup_steps": 25},
    "batch 1,024, rate 4 x the rule's, warm-up 25": {"batch_size": 1024, "lr": 4 * RULE_LR, "lr_warmup_steps": 25},
    "batch 2,048, rate 8 x the rule's, warm-up 13 (the demo's now)": DEMO_SAE_BATCH,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=status.ROOT / "bench/results/demo-sae-batch.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ds = demo_set()
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    words = {"regex": status.run_regex(ds, split, demo_regex)["f1"],
             "regex_cues": status.run_regex(ds, split, demo_regex_cues)["f1"],
             "tfidf_lr": status.run_tfidf(ds, split)["f1"]}  # what words alone reach on the same split
    x, _ = status.document_vectors(ds)
    seg, _ = status.segment_vectors(ds)
    rows: dict[str, list[dict]] = {}
    for name, changed in CONFIGS.items():
        for seed in (int(s) for s in args.seeds.split(",")):
            out: dict = {}
            keep: list = []
            t0 = time.perf_counter()
            probe = status.segment_probe(x, seg, ds, split, out, seed=seed, keep=keep,
                                         **({"max_steps": None, "lr": None, "epochs": 8} | changed))
            rows.setdefault(name, []).append({
                "seed": seed, "probe_segments_f1": probe["f1"], "fvu_heldout": out["sae_segments"]["fvu_heldout"],
                "features_firing_on_notes": int((keep[0].documents.getnnz(axis=0) > 0).sum()),
                "sae_stage_s": out["stages"]["sae_segments"]["seconds"], "seconds": round(time.perf_counter() - t0, 1),
                "batch_size": out["sae_segments"]["batch_size"], "lr": changed.get("lr", RULE_LR)})
            print(name, json.dumps(rows[name][-1]), flush=True)
    summary = {name: {k: round(sum(r[k] for r in rs) / len(rs), 4)
                      for k in ("probe_segments_f1", "fvu_heldout", "features_firing_on_notes", "sae_stage_s")}
               for name, rs in rows.items()}
    report = {"benchmark": "demo-sae-batch", "what": __doc__.split("\n\n")[1].replace("\n", " "),
              "data": {"notes": len(ds.texts), "segments": len(seg.vectors), "train_notes": len(split.train),
                       "test_notes": len(split.test)},
              "words_baselines_f1": words, "mean_over_seeds": summary, "runs": rows,
              "machine": {"platform": platform.platform(), "torch_threads": torch.get_num_threads()},
              "command": " ".join(["python bench/demo_sae_batch.py", *sys.argv[1:]])}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
