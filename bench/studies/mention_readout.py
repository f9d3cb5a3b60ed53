"""What the probe reads on E3C: a sentence's document codes (what a probe concept reads today), the codes of the
clause holding the annotated mention (max over the clauses that overlap an event's offsets:
`gateway.domain.concepts.scope.segments_holding`), that clause with the sentence's codes beside it (a scoped
probe's "context"), and a two-stage read (the readout, then an L2 logistic regression refitted on its 20
largest-weight features: a sparse view of a dense readout). Every variant is read by the product's readout
(`gateway.domain.concepts.readout.fit_readout`: row-L2 + L2 or raw + L1, C by CV on the training labels only).

The sets are bench/real_sets.py's (the product's default embedding and SAE runs over the layer-1 sentences and a
1 M-character sample of layer-3 cases, cached under /tmp/prisma-bench/real); the split is bench/real_text.py's
(`group_split`, by case, 25 % held out), the draws its own (10 seeded draws at 50, 100, 200 labels; all labels
once). F1 of `not_actual` on the held-out sentences, TF-IDF + LR on the same draws beside them.

    nice -n 10 .venv/bin/python bench/studies/mention_readout.py --languages en,es

Writes bench/studies/results/mention-readout.json.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import E3C, prepare  # noqa: E402
from bench.studies.e3c_study import main, score_draws  # noqa: E402
from contracts.sparse import max_pool_rows  # noqa: E402
from gateway.domain.concepts.readout import fit_readout  # noqa: E402
from gateway.domain.concepts.scope import segments_holding  # noqa: E402
from services.embedder.segments import segment_spans  # noqa: E402

OUT = ROOT / "bench/studies/results/mention-readout.json"
TOP = 20
METHODS = ("document", "mention", "mention_with_document", "two_stage", "tfidf_lr")


def mentions(lang: str, texts: list[str]) -> list[list[tuple[int, int]]]:
    """Each layer-1 sentence's event offsets, moved to the text as the product stored it."""
    with (E3C / lang / "layer1-sentences.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for row, stored in zip(rows, texts):
        shift = row["text"].find(stored) if stored in row["text"] else 0
        out.append([(int(s) - shift, int(e) - shift) for s, e, *_ in json.loads(row["events"])])
    return out


def read_as(ds, lang: str) -> dict[str, sp.csr_matrix]:  # noqa: ANN001
    """Codes [docs, n] (or [docs, 2n]) each variant reads; the layer-3 rows stay empty."""
    owner, start, end = segment_spans(ds.texts)
    if not np.array_equal(owner, ds.segment_position):
        raise SystemExit("the segmenter cuts these texts differently from the run: its spans cannot be rebuilt")
    n_sentences = int((ds.y >= 0).sum())
    held = segments_holding(owner, np.stack([start, end], axis=1),
                            mentions(lang, ds.texts[:n_sentences]) + [[]] * (len(ds.texts) - n_sentences))
    rows = np.flatnonzero(held)
    mention = max_pool_rows(ds.segment_codes.tocsr()[rows], owner[rows], len(ds.texts))
    return {"document": ds.codes, "mention": mention,
            "mention_with_document": sp.hstack([mention, ds.codes], format="csr"),
            "held_fraction": np.isin(np.arange(n_sentences), owner[held]).mean()}


def two_stage(x: sp.csr_matrix, y: np.ndarray, test: sp.csr_matrix, seed: int) -> np.ndarray:
    fitted = fit_readout(x, y, seed=seed)
    top = np.argsort(-np.abs(fitted.probe.coef[0]), kind="stable")[:TOP]
    refit = fit_readout(x[:, top], y, seed=seed, readouts={"row_l2": (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)})
    return (refit.probability(test[:, top]) >= 0.5).astype(np.int64)


def language(lang: str) -> dict:
    ds = prepare(f"e3c-{lang}")
    views = read_as(ds, lang)

    def predict(rows: np.ndarray, test: np.ndarray, d: int) -> dict[str, np.ndarray]:
        y, out = ds.y[rows], {}
        for m in ("document", "mention", "mention_with_document"):
            out[m] = (fit_readout(views[m][rows], y, seed=d).probability(views[m][test]) >= 0.5).astype(np.int64)
        out["two_stage"] = two_stage(views["document"][rows], y, views["document"][test], d)
        return out

    return {"sentences_with_a_held_clause": round(float(views["held_fraction"]), 4),
            **score_draws(lang, ds, list(METHODS), predict)}


if __name__ == "__main__":
    main(__doc__, OUT, list(METHODS), language, "bench/studies/mention_readout.py")
