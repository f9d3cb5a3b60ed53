"""The probe's penalty and class weights on E3C: the product's readout (`gateway.domain.concepts.readout.fit_readout`:
row-L2 rows + L2 or raw codes + L1, C by CV) against each of its two candidates alone, an elastic net (half L1, half
L2, saga) on the row-L2 rows, and the row-L2 readout without class weights. Every variant chooses C by stratified
5-fold (3 from 400 labels) cross-validation on F1 over the training labels only (scikit-learn's LogisticRegressionCV
for those the product does not fit), on the SAE run's document codes.

The sets are bench/real_sets.py's (cached under /tmp/prisma-bench/real); the split is bench/real_text.py's
(`group_split`, by case, 25 % held out), the draws its own (10 seeded draws at 50, 100, 200 labels; all labels once).
F1 of `not_actual` on the held-out sentences.

    nice -n 10 .venv/bin/python bench/studies/readout_penalties.py --languages en,es,fr,eu

Writes bench/studies/results/readout-penalties.json.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import prepare  # noqa: E402
from bench.studies.e3c_study import main, score_draws  # noqa: E402
from gateway.domain.concepts.readout import (  # noqa: E402
    FEW_FOLDS, MANY_LABELS, READOUT_FOLDS, READOUTS, fit_readout, normalise_rows)

OUT = ROOT / "bench/studies/results/readout-penalties.json"
METHODS = ("readout", "row_l2", "l1", "elastic_net", "row_l2_unweighted")


def cv_fit(x: sp.csr_matrix, y: np.ndarray, seed: int, **kw):  # noqa: ANN003, ANN201
    """A LogisticRegressionCV fitted with C chosen on F1 over the product's folds and row-L2 C grid."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    folds = min(READOUT_FOLDS if len(y) < MANY_LABELS else FEW_FOLDS, int(np.bincount(y, minlength=2).min()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)  # scikit-learn 1.9's notices of 1.10's attributes
        return LogisticRegressionCV(Cs=list(READOUTS["row_l2"]), cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
                                    scoring="f1", random_state=seed, **kw).fit(x, y)


def language(lang: str) -> dict:
    ds = prepare(f"e3c-{lang}")
    unit = normalise_rows(ds.codes)

    def predict(rows: np.ndarray, test: np.ndarray, d: int) -> dict[str, np.ndarray]:
        y, out = ds.y[rows], {}
        for name, readouts in (("readout", READOUTS), ("row_l2", {"row_l2": READOUTS["row_l2"]}),
                               ("l1", {"l1": READOUTS["l1"]})):
            fitted = fit_readout(ds.codes[rows], y, seed=d, readouts=readouts)
            out[name] = (fitted.probability(ds.codes[test]) >= 0.5).astype(np.int64)
        out["elastic_net"] = cv_fit(unit[rows], y, d, solver="saga", l1_ratios=[0.5], class_weight="balanced",
                                    max_iter=2000).predict(unit[test])
        out["row_l2_unweighted"] = cv_fit(unit[rows], y, d, solver="liblinear", l1_ratios=(0.0,),
                                          max_iter=500).predict(unit[test])
        return out

    return score_draws(lang, ds, list(METHODS), predict)


if __name__ == "__main__":
    main(__doc__, OUT, list(METHODS), language, "bench/studies/readout_penalties.py")
