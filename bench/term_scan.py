"""Term index in one process or two → bench/results/term-scan.json: the time to build naming's term index
(`TermIndex` from `term_scan.scan_corpus`) with every text read here against the second half read by a forked child,
on real clinical cases read in place (E3C layer 3: French, and English + Spanish + Basque together) and on 200,000
generated notes (bench/e2e_data.py, seed 0); the two alternate, and each side's index must be the same (vocabulary,
entries, spellings and their order).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from classify import machine  # noqa: E402
from e2e_data import generate_notes  # noqa: E402

from services.interpreter.backends import words  # noqa: E402
from services.interpreter.backends.keywords import TermIndex  # noqa: E402
from services.interpreter.backends.term_scan import TWO_PROCESSES_FROM, scan_corpus  # noqa: E402

E3C = ROOT.parent / "shared/data/e3c"
RESULTS = ROOT / "bench/results/term-scan.json"


def cases(*languages: str) -> list[str]:
    out: list[str] = []
    for lang in languages:
        with gzip.open(E3C / lang / "layer3.jsonl.gz", "rt", encoding="utf-8") as f:
            out += [json.loads(line)["text"] for line in f]
    return out


def build(texts: list[str], sizes: np.ndarray, two: bool) -> tuple[float, TermIndex]:
    words._WORD_INFO.clear()  # each side starts without the other's folded words
    t0 = time.perf_counter()
    index = TermIndex(scan_corpus(texts.__getitem__, len(texts), sizes=sizes, two_processes=two))
    return time.perf_counter() - t0, index


def same(a: TermIndex, b: TermIndex) -> bool:
    return (a.vocab.tolist() == b.vocab.tolist() and (a.matrix != b.matrix).nnz == 0
            and a.background.tolist() == b.background.tolist()
            and [(w, list(c.items())) for w, c in a.surfaces.items()] == [(w, list(c.items())) for w, c in b.surfaces.items()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sets = {"e3c fr layer 3": cases("fr"), "e3c en + es + eu layer 3": cases("en", "es", "eu"),
            "200,000 generated notes": [n.text for n in generate_notes(200_000, seed=0)]}
    report: dict = {"what": __doc__.split("\n\n")[0], "machine": machine(), "rounds": args.rounds,
                    "two_processes_from_bytes": TWO_PROCESSES_FROM, "sets": {}}
    for name, texts in sets.items():
        sizes = np.array([len(t.encode()) for t in texts], dtype=np.int64)
        seconds: dict[str, list[float]] = {"one_process": [], "two_processes": []}
        built = {}
        for _ in range(args.rounds):
            for key, two in (("one_process", False), ("two_processes", True)):
                s, built[key] = build(texts, sizes, two)
                seconds[key].append(round(s, 2))
        best = {k: min(v) for k, v in seconds.items()}
        report["sets"][name] = {
            "texts": len(texts), "megabytes": round(int(sizes.sum()) / 1e6, 1),
            "default": "two processes" if sizes.sum() >= TWO_PROCESSES_FROM else "one process",
            "terms_kept": len(built["one_process"].vocab), "entries": int(built["one_process"].matrix.nnz),
            "seconds": seconds, "best_seconds": best,
            "ratio_one_over_two": round(best["one_process"] / best["two_processes"], 2),
            "same_index": same(built["one_process"], built["two_processes"])}
        print(name, report["sets"][name], flush=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
