"""Words read in their clause against words read in their note → bench/studies/results/clause-words.json.

With `word_states` (each clause read as the max over its words' codes, the words from the note's own pass) the
demo's clause probe fell from 0.956 to 0.737 while NegEx held (bench/results/status-word-states.json). Is it that a
word's state is read across the whole note, so that a word carries the other mentions' cues? Here each distinct
clause goes through the model alone (the pass an embedding run already makes for its clause vectors) and its words'
states are kept from that pass: a word then sees its own clause only. Same sets, split, SAE settings and probe as
bench/status.py (its `segment_probe` and `run_anchored`), seeds 0-2 for the clause probe:
  - note_words: the words of the note's own pass (status.py --word-states, cached in /tmp/prisma-bench);
  - clause_words: the words of each clause's own pass.

    nice -n 10 python bench/studies/clause_words.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import status as S  # noqa: E402
import status_core as C  # noqa: E402
from gateway.domain.concepts.probe import heldout_split  # noqa: E402
from services.embedder.distinct import distinct_texts  # noqa: E402
from services.embedder.encoder import embed_texts  # noqa: E402
from services.embedder.segments import WORD, token_segments  # noqa: E402
from services.sae.segments import Segments  # noqa: E402
from status_data import demo_set, negex_set  # noqa: E402

RESULTS = ROOT / "bench" / "studies" / "results" / "clause-words.json"


def clause_words(ds: S.LabelledSet, seg: Segments) -> Segments:
    """`seg` with each clause's words read in the clause alone (each distinct clause text once)."""
    lm = C._model()
    pieces = [ds.texts[d][a:b] for d, a, b in zip(seg.position.tolist(), seg.char_start.tolist(),
                                                   seg.char_end.tolist())]
    found = distinct_texts(lm, pieces)
    emb = embed_texts(lm, found.texts, pooling="mean", normalize=True, token_states=True)
    words = token_segments(found.texts, emb, WORD)  # rows in distinct-text order
    first = np.searchsorted(words.doc, np.arange(len(found.texts)))  # [U]
    count = np.bincount(words.doc, minlength=len(found.texts))  # [U]
    per = count[found.inverse]  # [S]: each clause's words
    owner = np.repeat(np.arange(len(pieces)), per)  # [W]
    offset = np.arange(len(owner)) - np.repeat(np.cumsum(per) - per, per)
    rows = np.repeat(first[found.inverse], per) + offset
    return seg._replace(words=words.vectors[rows], word_segment=owner.astype(np.int64))


def measure(ds: S.LabelledSet, seg: Segments, x: np.ndarray, split) -> dict:  # noqa: ANN001
    out: dict = {}
    pooled: list = []
    probe = S.segment_probe(x, seg, ds, split, out, keep=pooled)
    seeds = [probe["f1"]] + [S.segment_probe(x, seg, ds, split, {}, seed=s)["f1"] for s in (1, 2)]
    _, anchored = S.run_anchored(ds, split, seg, pooled[0], out)
    return {"clause_probe_f1_seeds_0_1_2": seeds, "anchored_probe_f1": anchored["f1"],
            "fvu_heldout": out["sae_segments"]["fvu_heldout"], "words": int(len(seg.words))}


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    C.WORD_STATES[0] = True
    report: dict = {"what": __doc__.split("\n\n")[1].replace("\n", " ")}
    for make in (demo_set, negex_set):
        ds = make()
        split = heldout_split(ds.y, test_fraction=0.25, seed=0)
        x, _ = C.document_vectors(ds)
        note_seg, _ = C.segment_vectors(ds)  # the clauses with the note's words (status.py --word-states's cache)
        t0 = time.perf_counter()
        clause_seg = clause_words(ds, note_seg)
        seconds = time.perf_counter() - t0
        report[ds.name] = {"note_words": measure(ds, note_seg, x, split),
                           "clause_words": measure(ds, clause_seg, x, split) | {"embed_seconds": round(seconds, 1)}}
        print(ds.name, json.dumps(report[ds.name]), flush=True)
    status = json.loads((ROOT / "bench/results/status.json").read_text())
    report["clause_vectors_status_json"] = {k: status["f1"][f"{k}.probe_segments.f1"] for k in ("demo", "negex")} | {
        f"{k}_anchored": status["f1"][f"{k}.probe_anchored.f1"] for k in ("demo", "negex")}
    report["command"] = "python bench/studies/clause_words.py"
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
