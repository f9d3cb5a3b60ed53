"""What each name's threshold promises, checked on a whole run: of the segments at or above a reliable name's
threshold, the share where the name holds (`phrases.name_holds`), over every segment of the run, not the
calibration sample the naming job estimated it from. The promise is 0.8 (calibration.MIN_PRECISION).

Reads a Prisma data directory (embedded mode: SQLite and the artifact folder), e.g. one `prisma demo` made:

    python bench/studies/threshold_truth.py --data-dir ~/.local/share/prisma --sae-run 1 --key after [--out F]

Each call adds its figures under `--key` in the output (so two runs of the same SAE, named before and after a
change, sit side by side); `bench/status.py` reports the same figures for its own names
(`naming.threshold_precision_in_corpus`).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    import numpy as np
    import pyarrow as pa
    import scipy.sparse as sp

    from services.interpreter.corpus import Corpus
    from status_expression import Names, threshold_truth

    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--sae-run", type=int, default=1)
    parser.add_argument("--key", required=True, help="where the figures go in the output, e.g. before / after")
    parser.add_argument("--note", default="", help="what this run is (the commit, the change)")
    parser.add_argument("--language", default="it")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/studies/results/threshold-truth.json")
    args = parser.parse_args()

    run_dir = args.data_dir / "artifacts" / "sae-runs" / str(args.sae_run)
    codes = sp.load_npz(run_dir / "segment_codes.csr.npz").tocsc()
    index = np.load(run_dir / "segments.npz")
    db = sqlite3.connect(args.data_dir / "prisma.db")
    dataset = db.execute("SELECT e.dataset_id FROM sae_runs s JOIN embedding_runs e ON e.id = s.embedding_run_id "
                         "WHERE s.id = ?", (args.sae_run,)).fetchone()[0]
    texts = dict(db.execute("SELECT position, text FROM documents WHERE dataset_id = ?", (dataset,)))
    segments = [texts[int(p)][int(a):int(b)] for p, a, b in zip(index["position"], index["char_start"], index["char_end"])]
    corpus = Corpus(pa.array(segments), np.arange(len(segments)), np.zeros((len(segments), 1), np.float32), codes)
    rows = db.execute('SELECT f."index", i.label, i.threshold, i.reliable FROM features f JOIN interpretations i '
                      "ON i.id = f.best_interpretation_id WHERE f.sae_run_id = ?", (args.sae_run,)).fetchall()
    names = Names({f: label for f, label, _, _ in rows}, {f: t for f, _, t, _ in rows if t is not None},
                  {f for f, _, _, r in rows if r}, [])
    figures = {"note": args.note, "segments": len(segments), "named": len(rows), "reliable": len(names.reliable),
               "with_threshold": len(names.thresholds), **threshold_truth(corpus, names, args.language)}
    out = json.loads(args.out.read_text()) if args.out.exists() else {
        "what": "of the segments at or above each reliable name's threshold, the share where the name holds, over "
                "every segment of the run (bench/studies/threshold_truth.py); the threshold promises 0.8"}
    out[args.key] = figures
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
