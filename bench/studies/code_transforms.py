"""How the probe's codes are scaled before its readout, on E3C: the SAE run's document codes as they are (what a
probe concept reads by default), log1p of each activation, each feature divided by its largest activation in the
corpus (max-abs), each feature's presence (0/1), and presence or activation weighted by the feature's inverse
document frequency in the corpus (the features read as TF-IDF reads words). The scales are the corpus's own (every
document of the run, labelled or not, no label read): a run's statistics hold them, so a probe could apply them to
new notes. Every variant is read by the product's readout (`gateway.domain.concepts.readout.fit_readout`: row-L2 +
L2 or raw + L1, C by CV on the training labels only).

The sets are bench/real_sets.py's (the product's default embedding and SAE runs, cached under
/tmp/prisma-bench/real); the split is bench/real_text.py's (`group_split`, by case, 25 % held out), the draws its
own (10 seeded draws at 50, 100, 200 labels; all labels once). F1 of `not_actual` on the held-out sentences, with
TF-IDF + LR on the same draws beside them.

    nice -n 10 .venv/bin/python bench/studies/code_transforms.py --languages en,es,fr,eu

Writes bench/studies/results/code-transforms.json.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import prepare  # noqa: E402
from bench.studies.e3c_study import main, score_draws  # noqa: E402
from gateway.domain.concepts.readout import fit_readout  # noqa: E402

OUT = ROOT / "bench/studies/results/code-transforms.json"
METHODS = ("codes", "log1p", "max_abs", "presence", "presence_idf", "codes_idf", "tfidf_lr")


def transforms(codes: sp.csr_matrix) -> dict[str, Callable[[sp.csr_matrix], sp.csr_matrix]]:
    """Each variant as a function of rows of `codes`, its scales taken from all of `codes` (the corpus)."""
    x = sp.csr_matrix(codes, dtype=np.float64)
    n_docs = x.shape[0]
    df = np.bincount(x.indices, minlength=x.shape[1])  # documents each feature fires in
    idf = np.log((1 + n_docs) / (1 + df)) + 1  # scikit-learn's smooth idf
    top = np.asarray(abs(x).max(0).todense()).ravel()
    inverse_top = np.divide(1.0, top, out=np.zeros_like(top), where=top > 0)

    def scaled(by: np.ndarray) -> Callable[[sp.csr_matrix], sp.csr_matrix]:
        return lambda rows: sp.csr_matrix(rows, dtype=np.float64) @ sp.diags(by)

    def present(rows: sp.csr_matrix) -> sp.csr_matrix:
        out = sp.csr_matrix(rows, dtype=np.float64, copy=True)
        out.data = (out.data != 0).astype(np.float64)
        return out

    def log1p(rows: sp.csr_matrix) -> sp.csr_matrix:
        return sp.csr_matrix(rows, dtype=np.float64).log1p()

    return {"codes": lambda rows: sp.csr_matrix(rows, dtype=np.float64), "log1p": log1p,
            "max_abs": scaled(inverse_top), "presence": present,
            "presence_idf": lambda rows: present(rows) @ sp.diags(idf), "codes_idf": scaled(idf)}


def language(lang: str) -> dict:
    ds = prepare(f"e3c-{lang}")
    views = {name: f(ds.codes) for name, f in transforms(ds.codes).items()}
    picked: dict[str, dict[str, int]] = {m: {} for m in views}

    def predict(rows: np.ndarray, test: np.ndarray, d: int) -> dict[str, np.ndarray]:
        out = {}
        for name, x in views.items():
            fitted = fit_readout(x[rows], ds.y[rows], seed=d)
            picked[name][fitted.readout] = picked[name].get(fitted.readout, 0) + 1
            out[name] = (fitted.probability(x[test]) >= 0.5).astype(np.int64)
        return out

    found = score_draws(lang, ds, list(METHODS), predict)
    return {"test_sentences": found.pop("test_sentences"), "train_sentences": found.pop("train_sentences"),
            "readout_picked": picked, **found}


if __name__ == "__main__":
    main(__doc__, OUT, list(METHODS), language, "bench/studies/code_transforms.py")
