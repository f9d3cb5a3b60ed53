"""Past READOUT_CV_MAX training labels, the readout scores its candidates on one fold: is the choice that of every
fold? On a 200,000-note run of bench/e2e.py (its data dir, kept by stopping the run after its SAE stage: imported
vectors, the SAE at `--sae-steps`), the concept bench/e2e.py makes (`bronchiolitis:confirmed` from the label
column, the product's 25 % stratified split, seed 0) is fitted by `fit_readout` with the cap (one fold) and without
it (every fold), on the same training labels; each is scored on the same held-out notes.

    .venv/bin/python bench/e2e.py --n 200000 --embedding imported --sae-steps 600 --tmp /tmp/e2e  # stop it once
    # its log shows the sae stage, then:
    .venv/bin/python bench/studies/readout_one_fold.py /tmp/e2e/prisma-e2e-…

Writes bench/studies/results/readout-one-fold.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from classify import machine  # noqa: E402

from gateway.domain.concepts import readout  # noqa: E402
from gateway.domain.concepts.probe import heldout_split  # noqa: E402

LABEL = "bronchiolitis:confirmed"  # bench/e2e.py's PROBE_LABEL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a bench/e2e.py data dir (notes.csv, data/artifacts)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/studies/results/readout-one-fold.json")
    args = parser.parse_args()
    sae = sorted((args.run / "data" / "artifacts").glob("sae-runs/*/cfg.json"))[0].parent
    codes = sp.load_npz(sae / "codes.csc.npz").tocsr()
    csv.field_size_limit(1 << 30)
    with open(args.run / "notes.csv", newline="") as f:
        y = np.array([LABEL in (row["labels"] or "").split("|") for row in csv.DictReader(f)], np.int64)
    split = heldout_split(y, test_fraction=0.25, seed=0)
    report = {"what": __doc__.split("\n")[0], "notes": len(y), "positives": int(y.sum()), "features": codes.shape[1],
              "train": len(split.train), "test": len(split.test), "sae": json.loads((sae / "cfg.json").read_text()),
              "machine": machine(), "fits": {}}
    for name, cap in (("one_fold", readout.READOUT_CV_MAX), ("every_fold", None)):
        t0 = time.perf_counter()
        fitted = readout.fit_readout(codes[split.train], y[split.train], seed=0, cv_max=cap)
        seconds = time.perf_counter() - t0
        pred = (fitted.probability(codes[split.test]) >= 0.5).astype(np.int64)
        report["fits"][name] = {"seconds": round(seconds, 1), "readout": fitted.readout, "C": fitted.probe.C,
                                "cv_f1": round(fitted.probe.cv_score, 4),
                                "cv_labels": len(fitted.out_of_fold),
                                "held_out_f1": round(readout.f1_of(y[split.test], pred), 4), "tried": fitted.tried}
        print(name, report["fits"][name], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
