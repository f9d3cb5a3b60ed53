"""Scoped probes with and without the whole note's features → bench/results/scope-context.json.

A scoped probe (a concept with `segment_words`) reads the max over the segments that name its topic. On
NegEx that loses what a list carries across a comma ("no fever, chills, or [cough]": the clause of the
mention has no cue). The product (gateway/domain/concepts/service.py, `train_scoped_probe`) fits the probe
on the scope's codes alone and on [scope's codes, the note's own codes] (`scope.probe_codes(context=True)`,
2n columns) and keeps the one with the higher cross-validated F1 on the training split. Measured here on
both labelled sets of bench/status.py (the same split, SAE settings, segments and anchors; its caches),
for SAE seeds 0, 1, 2: held-out F1 and train-CV F1 of the scope alone, of the scope with the note, of the
note alone (probe_segments: the max over every segment), and of what the product's rule picks; the words
baselines of status.py beside them.

    python bench/scope_context.py [--seeds 0,1,2] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import status as st  # noqa: E402
from gateway.domain.concepts.probe import fit_probe, heldout_split  # noqa: E402
from services.sae.encoding import max_pool_rows  # noqa: E402
from services.sae.segments import pooled_codes, training_vectors  # noqa: E402
from status_data import LabelledSet, demo_set, negex_set  # noqa: E402

RESULTS = ROOT / "bench/results/scope-context.json"


def probe(codes: sp.csr_matrix, ds: LabelledSet, split: st.Split) -> dict:
    fitted = fit_probe(codes[split.train], ds.y[split.train], seed=0)
    return _written(st._scored(ds.y[split.test], fitted.predict(codes[split.test]),
                               cv_f1_train=round(fitted.cv_score, 4), features_used=len(fitted.used_features)))


def _written(scored: dict) -> dict:
    """Figures without the predictions status.py's comparisons read (not written here)."""
    scored.pop(st.PREDICTED, None)
    return scored


def one_seed(ds: LabelledSet, split: st.Split, x: np.ndarray, seg: st.Segments, hit: np.ndarray, seed: int) -> dict:
    """`hit`: the indices of the segments that name the topic (the scope)."""
    x_train, x_hold = training_vectors(x, seg, st.SEGMENTS_TRAIN_ON, split.train, split.test)
    model, info = st.train_sae(x_train, x_hold, seed)
    pooled = pooled_codes(model, seg, len(x))
    note = pooled.documents.tocsr()  # the run's document codes (max over every segment)
    scope = max_pool_rows(pooled.segments.tocsr()[hit], seg.position[hit], len(ds.texts)).tocsr()
    out = {"sae_fvu_heldout": info["fvu_heldout"],
           "scope_alone": probe(scope, ds, split),
           "scope_and_note": probe(sp.hstack([scope, note], format="csr"), ds, split),
           "note_alone": probe(note, ds, split)}
    wide = out["scope_and_note"]["cv_f1_train"] > out["scope_alone"]["cv_f1_train"]  # the product's rule
    out["chosen"] = {"context": "document" if wide else None, **out["scope_and_note" if wide else "scope_alone"]}
    return out


def run_set(ds: LabelledSet, seeds: list[int]) -> dict:
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    x, _ = st.document_vectors(ds)
    seg, _ = st.segment_vectors(ds)
    anchor = re.compile(st.ANCHORS[ds.name], re.IGNORECASE)
    pieces = [ds.texts[d][a:b] for d, a, b in zip(seg.position.tolist(), seg.char_start.tolist(), seg.char_end.tolist())]
    hit = np.flatnonzero([bool(anchor.search(p)) for p in pieces])
    joined: list[list[str]] = [[] for _ in ds.texts]  # the scope's text, as status.py's tfidf_anchored reads it
    for i in hit.tolist():
        joined[seg.position[i]].append(pieces[i])
    anchored_text = LabelledSet(ds.name, [" ".join(p) for p in joined], ds.y, ds.description)
    by_seed = {str(s): one_seed(ds, split, x, seg, hit, s) for s in seeds}
    mean = {k: round(float(np.mean([r[k]["f1"] for r in by_seed.values()])), 4)
            for k in ("scope_alone", "scope_and_note", "note_alone", "chosen")}
    return {"n": len(ds.texts), "test": len(split.test), "anchor": st.ANCHORS[ds.name],
            "tfidf_lr": _written(st.run_tfidf(ds, split)),
            "tfidf_lr_on_the_scope": _written(st.run_tfidf(anchored_text, split)),
            "by_seed": by_seed, "mean_f1": mean}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    results = {name: run_set(make(), seeds) for name, make in (("negex", negex_set), ("demo", demo_set))}
    report = {"benchmark": "scope-context", "model": st.MODEL_NAME[0],
              "settings": {"sae": st.SAE, "segments": st.DEFAULT_UNIT, "train_on": st.SEGMENTS_TRAIN_ON,
                           "seeds": seeds, "torch_threads": args.threads, "cpus": os.cpu_count(),
                           "machine": platform.machine(),
                           "rule": "scope_and_note where its train-CV F1 is strictly higher than scope_alone's"},
              "results": results}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v["mean_f1"] for k, v in results.items()}, indent=2))


if __name__ == "__main__":
    main()
