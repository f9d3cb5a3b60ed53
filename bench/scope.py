"""Which segments a scoped probe reads (`segment_words`): the per-segment loop it replaced against
`scope.matching_segments` (one regex per batch of texts, `np.searchsorted` for the spans).

On the demo corpus's generator (Italian notes, seed 0) cut into clauses as the embedder cuts them
(`segment_spans`, about 36 a note), in batches of 1,000 documents as the apply job reads them from
the documents table (reading the texts is the same for both and is not timed): seconds for each,
interleaved, the same result checked, for the demo's word (`bronchiolit`) and for five words. The
apply job reads every document: at 200,000 notes it is `--notes`' figure times 200,000 / notes
(linear in the segments and characters: each batch is independent).

    PYTHONPATH=. nice -n 10 python bench/scope.py [--notes 20000] [--repeats 3]

Writes bench/results/scope.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gateway.demo.corpus import generate_notes  # noqa: E402
from gateway.domain.concepts.texts import TEXT_BATCH  # noqa: E402
from gateway.domain.concepts.scope import SegmentScope  # noqa: E402
from gateway.search.expressions import SegmentCodes  # noqa: E402
from services.embedder.segments import segment_spans  # noqa: E402

AT_SCALE = 200_000
WORDS = {"one word (the demo's)": ["bronchiolit"],
         "five words": ["bronchiolit", "otite", "polmonit", "febbre", "sospett"]}


def per_segment(segments: SegmentCodes, words: Sequence[str], batch: np.ndarray, texts: list[str]) -> np.ndarray:
    """The loop `scoped_segments` ran before, on one batch: every segment sliced, casefolded, searched."""
    needles = [w.casefold() for w in words]
    hits: list[int] = []
    lo, hi = np.searchsorted(segments.doc, batch, "left"), np.searchsorted(segments.doc, batch, "right")
    for first, last, text in zip(lo.tolist(), hi.tolist(), texts):
        for s in range(first, last):
            a, b = segments.spans[s]
            piece = text[a:b].casefold()
            if any(n in piece for n in needles):
                hits.append(s)
    return np.asarray(hits, dtype=np.int64)


def run(find: Callable[[np.ndarray, list[str]], np.ndarray], batches: list[tuple[np.ndarray, list[str]]]
        ) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    hits = np.concatenate([find(positions, texts) for positions, texts in batches])
    return time.perf_counter() - start, hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/scope.json")
    args = parser.parse_args()
    notes = [n.text for n in generate_notes(n=args.notes, seed=0)]
    doc, start, end = segment_spans(notes)
    segments = SegmentCodes(np.zeros((len(doc), 1), np.float32), doc, np.stack([start, end], axis=1))
    batches = [(np.arange(a, min(a + TEXT_BATCH, len(notes))), notes[a : a + TEXT_BATCH])
               for a in range(0, len(notes), TEXT_BATCH)]
    scale = AT_SCALE / len(notes)
    result: dict[str, object] = {
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip(),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                    "note": "2 cores shared with other work; run under nice -n 10"},
        "notes": len(notes), "segments": len(doc), "segments_per_note": round(len(doc) / len(notes), 1),
        "chars_per_note": round(sum(map(len, notes)) / len(notes), 1), "batch": TEXT_BATCH,
        "scaled_to_notes": AT_SCALE,
    }
    for name, words in WORDS.items():
        scope = SegmentScope(segments, tuple(words))
        timings: dict[str, list[float]] = {"per_segment": [], "vectorised": []}
        for _ in range(args.repeats):  # interleaved
            before, want = run(lambda b, t: per_segment(segments, words, b, t), batches)
            after, got = run(scope.matching, batches)
            if not np.array_equal(want, got):
                raise SystemExit(f"{name}: the two disagree on {np.setxor1d(want, got).size} segments")
            timings["per_segment"].append(before)
            timings["vectorised"].append(after)
        old, new = statistics.median(timings["per_segment"]), statistics.median(timings["vectorised"])
        result[name] = {
            "words": words, "matching_segments": int(len(got)),
            "notes_with_one": int(len(np.unique(doc[got]))),
            "seconds_per_segment": [round(x, 3) for x in timings["per_segment"]],
            "seconds_vectorised": [round(x, 3) for x in timings["vectorised"]],
            "seconds_per_segment_median": round(old, 3), "seconds_vectorised_median": round(new, 3),
            "ratio": round(old / new, 1),
            "at_scale_seconds_per_segment": round(old * scale, 1), "at_scale_seconds_vectorised": round(new * scale, 1),
        }
        print(name, json.dumps(result[name]))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
