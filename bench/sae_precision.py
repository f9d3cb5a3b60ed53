"""SAE step speed, fp32 against bf16 → bench/results/sae-precision.json.

The product's trainer (`services.sae.trainer.SaeTrainer`, every part of a step: encoder matmul and top-k, the AuxK
top-k, sparse decode, sparse backward, gradient projection, Adam, decoder renormalisation) on real clause vectors
(E3C English: the clause and document vectors of bench/real_sets.py's cached default embedding run, read in place),
with `SaeConfig.precision` "fp32" and "bf16" (the encoder's matmul under autocast), at the default size
(expansion 8, n = 3,072) and at bench/e2e.py's (expansion 32, n = 12,288), k = 32, batches of 256 rows. The two
trainers of a size are stepped in alternating blocks in one process, so both see the same machine load; a block's
milliseconds per step, median over the blocks. Quality is not read here: the held-out FVU and the probe's F1 of
each precision are bench/studies/results/sae-precision.json (bench/studies/sae_corpus.py) and e2e.json.

    nice -n 5 .venv/bin/python bench/sae_precision.py [--blocks 8] [--steps 25] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import prepare  # noqa: E402
from bench.real_text import machine  # noqa: E402
from contracts.sae import SaeConfig  # noqa: E402
from services.cpu import cpu_flags, cpu_has_native_bf16  # noqa: E402
from services.sae.trainer import SaeTrainer, resolve_precision  # noqa: E402

OUT = ROOT / "bench/results/sae-precision.json"
SIZES = (8, 32)  # expansion factors: the default, and bench/e2e.py's


def vectors() -> np.ndarray:
    """E3C English's clause vectors then its document vectors (what a default SAE run trains on)."""
    from bench.studies.sae_corpus import segment_vectors

    ds = prepare("e3c-en")
    seg = segment_vectors("e3c-en", len(ds.texts))
    return np.ascontiguousarray(np.concatenate([seg.vectors, ds.dense]), dtype=np.float32)


def timed(trainer: SaeTrainer, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    return (time.perf_counter() - t0) / steps * 1000


def size(x: torch.Tensor, expansion: int, blocks: int, steps: int) -> dict:
    runs = {p: SaeTrainer(x, SaeConfig(expansion_factor=expansion, k=32, max_steps=10**6, seed=0, precision=p),
                          torch.device("cpu")) for p in ("fp32", "bf16")}
    for trainer in runs.values():  # warm-up: kernels, allocator, the first dead latents
        timed(trainer, 20)
    ms: dict[str, list[float]] = {p: [] for p in runs}
    for block in range(blocks):
        order = list(runs) if block % 2 == 0 else list(reversed(runs))
        for p in order:
            ms[p].append(round(timed(runs[p], steps), 2))
    med = {p: float(np.median(v)) for p, v in ms.items()}
    return {"expansion_factor": expansion, "n": runs["fp32"].sae.num_latents, "k": 32, "batch_size": 256,
            "ms_per_step_median": {p: round(v, 2) for p, v in med.items()}, "ms_per_step_blocks": ms,
            "fp32_over_bf16": round(med["fp32"] / med["bf16"], 2),
            "e2e_schedule_seconds_at_15625_steps": {p: round(v * 15_625 / 1000, 1) for p, v in med.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=25, help="steps per block")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the SAE worker's default: every core)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x = torch.from_numpy(vectors())
    report = {
        "what": __doc__.split("\n\n")[1].replace("\n", " "),
        "data": {"source": "E3C en, bench/real_sets.py's cached default embedding run: clause and document vectors",
                 "rows": int(x.shape[0]), "d": int(x.shape[1])},
        "sizes": [size(x, e, args.blocks, args.steps) for e in SIZES],
        "auto_picks_here": resolve_precision("auto", torch.device("cpu")),
        "cpu_native_bf16": cpu_has_native_bf16(),
        "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx", "avx2"))),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": machine() | {"torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                                "cpus": os.cpu_count()},
        "command": " ".join(["nice -n 5 .venv/bin/python bench/sae_precision.py", *sys.argv[1:]]),
    }
    print(json.dumps(report["sizes"], indent=1), flush=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
