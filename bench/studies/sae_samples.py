"""How many training samples the SAE needs: held-out FVU against the samples seen, on real clinical text.

Corpus: E3C layer-3 clinical cases (unlabelled), English (all 3,000) and Spanish (the first cases up to 3 M
characters), cut into the product's clauses (`services.embedder.segments.embed_segments`, unit "clause") and embedded
by the default model (multilingual-e5-small, fp32, its "passage: " prompt), as an embedding run with segments
embeds them. The product's 10 % hold-out split is made on cases (`holdout_split`, seed 0): no clause of a held-out
case is trained on. The product's trainer (`services.sae.trainer.SaeTrainer`, every step of its schedule: warm-up,
linear decay to the last step) trains the default SAE (expansion 8, k 32) and the 200,000-note benchmark's
(expansion 32: n = 12,288) for a budget of samples each (`max_steps` = budget / batch), one thread pair, seed 0; each
is read on the held-out clauses (FVU) with its wall seconds. `--batch-sizes` and `--lr-scales` (the learning rate
times the product's default for that SAE) train the same budgets with larger batches: fewer, dearer steps.

    nice -n 10 .venv/bin/python bench/studies/sae_samples.py [--budgets 250000,500000,...] [--expansions 8,32] \
        [--batch-sizes 256,512] [--lr-scales 1,1.414]

Writes bench/studies/results/sae-samples.json after every SAE (a run skips what the file holds).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from contracts.sae import SaeConfig  # noqa: E402
from services.sae.trainer import SaeTrainer, holdout_metrics, holdout_split  # noqa: E402

E3C = ROOT.parent / "shared/data/e3c"
CACHE = Path("/tmp/prisma-bench")
OUT = ROOT / "bench/studies/results/sae-samples.json"
CAPS = {"en": None, "es": 3_000_000}  # characters of each language's cases, in file order


def cases() -> list[str]:
    texts = []
    for lang, cap in CAPS.items():
        total = 0
        with gzip.open(E3C / lang / "layer3.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                text = json.loads(line)["text"]
                if cap is not None and total + len(text) > cap:
                    break
                texts.append(text)
                total += len(text)
    return texts


def clause_vectors(texts: list[str]) -> tuple[np.ndarray, np.ndarray, float]:
    """(vectors float32 [S, 384], each clause's case [S], seconds), cached in /tmp."""
    path = CACHE / f"sae-samples-e5-clauses-{len(texts)}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["vectors"], z["doc"], float(z["seconds"])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from services.embedder.models import load_model
    from services.embedder.segments import embed_segments

    lm = load_model("multilingual-e5-small", device=torch.device("cpu"), int8=False)
    t0 = time.perf_counter()
    seg = embed_segments(lm, texts, unit="clause")
    seconds = time.perf_counter() - t0
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=seg.vectors.astype(np.float32), doc=seg.doc, seconds=seconds)
    return seg.vectors.astype(np.float32), seg.doc, seconds


def train(x: np.ndarray, hold: np.ndarray, expansion: int, samples: int, batch: int = 256,
          lr_scale: float = 1.0) -> dict:
    base = SaeConfig(expansion_factor=expansion, k=32, batch_size=batch, max_steps=max(1, samples // batch),
                     seed=0, device="cpu")
    cfg = base.model_copy(update={"lr": base.resolved_lr(x.shape[1]) * lr_scale})
    trainer = SaeTrainer(torch.from_numpy(x), cfg, torch.device("cpu"))
    t0 = time.perf_counter()
    for _ in range(trainer.total_steps):
        trainer.train_step()
    seconds = time.perf_counter() - t0
    m = holdout_metrics(trainer.sae, hold, 0.0)
    return {"expansion_factor": expansion, "n": trainer.sae.num_latents, "samples": trainer.total_steps * batch,
            "batch_size": batch, "lr": cfg.lr, "lr_scale": lr_scale,
            "steps": trainer.total_steps, "epochs": round(trainer.total_steps * batch / len(x), 2),
            "fvu_heldout": round(float(m.fvu), 4), "fvu_train_last": round(trainer.curve[-1]["fvu"], 4),
            "dead_fraction": round(float((trainer.since_fired >= trainer.dead_after).float().mean()), 4),
            "seconds": round(seconds, 1), "samples_per_s": round(trainer.total_steps * batch / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default="250000,500000,1000000,2000000,4000000")
    parser.add_argument("--expansions", default="8,32")
    parser.add_argument("--batch-sizes", default="256")
    parser.add_argument("--lr-scales", default="1")
    args = parser.parse_args()
    torch.set_num_threads(2)
    texts = cases()
    vectors, doc, embed_seconds = clause_vectors(texts)
    train_docs, hold_docs = holdout_split(len(texts), 0.1, 0)
    held = np.isin(doc, hold_docs)
    x, hold = np.ascontiguousarray(vectors[~held]), np.ascontiguousarray(vectors[held])
    report = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    report.update({
        "what": __doc__.split("\n\n")[0], "cases": len(texts), "characters": sum(map(len, texts)),
        "clauses": {"train": len(x), "heldout": len(hold)}, "embedding_seconds": round(embed_seconds, 1),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%d"), "cpu_threads": torch.get_num_threads()})
    done = {(r["expansion_factor"], r["samples"], r.get("batch_size", 256), r.get("lr_scale", 1.0))
            for r in report["runs"]}
    grid = [(e, b, batch, scale) for e in map(int, args.expansions.split(",")) for b in map(int, args.budgets.split(","))
            for batch in map(int, args.batch_sizes.split(",")) for scale in map(float, args.lr_scales.split(","))]
    for expansion, budget, batch, scale in grid:
        if (expansion, budget // batch * batch, batch, scale) in done:
            continue
        row = train(x, hold, expansion, budget, batch, scale)
        report["runs"].append(row)
        print(json.dumps(row), flush=True)
        OUT.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
