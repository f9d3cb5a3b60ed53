"""How the probe's codes are scaled before its readout, on E3C: the SAE run's document codes as they are (what a
probe concept reads today), log1p of each activation, each feature divided by its largest activation in the
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

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import group_split, prepare  # noqa: E402
from bench.real_text import draw  # noqa: E402
from gateway.domain.concepts.baselines import _fit_tfidf  # noqa: E402
from gateway.domain.concepts.readout import f1_of, fit_readout  # noqa: E402

OUT = ROOT / "bench/studies/results/code-transforms.json"
BUDGETS = (50, 100, 200)
DRAWS = 10


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
    train, test = group_split(ds)
    y_test = ds.y[test]
    methods = [*views, "tfidf_lr"]
    scores: dict[str, dict[str, list[float]]] = {m: {} for m in methods}
    picked: dict[str, dict[str, int]] = {m: {} for m in views}
    for n in [*BUDGETS, "all"]:
        draws = [train] if n == "all" else [draw(train, ds.y, n, d) for d in range(DRAWS)]
        for d, rows in enumerate(draws):
            y = ds.y[rows]
            for name, x in views.items():
                fitted = fit_readout(x[rows], y, seed=d)
                picked[name][fitted.readout] = picked[name].get(fitted.readout, 0) + 1
                pred = (fitted.probability(x[test]) >= 0.5).astype(np.int64)
                scores[name].setdefault(str(n), []).append(f1_of(y_test, pred))
            tfidf = _fit_tfidf([ds.texts[i] for i in rows], y, d)
            pred = (np.zeros(len(test), np.int64) if tfidf is None
                    else tfidf[1].predict(tfidf[0].transform([ds.texts[i] for i in test])).astype(np.int64))
            scores["tfidf_lr"].setdefault(str(n), []).append(f1_of(y_test, pred))
        print(f"  {lang} {n}: " + ", ".join(f"{m} {np.mean(scores[m][str(n)]):.3f}" for m in methods), flush=True)
    return {"test_sentences": len(test), "train_sentences": len(train), "readout_picked": picked,
            **{m: {"f1_at": {k: round(float(np.mean(v)), 4) for k, v in s.items()},
                   "sd": {k: round(float(np.std(v)), 4) for k, v in s.items()}} for m, s in scores.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--languages", default="en,es,fr,eu")
    args = parser.parse_args()
    report = json.loads(OUT.read_text()) if OUT.exists() else {}
    langs = report.get("languages", {})
    for lang in [s.strip() for s in args.languages.split(",") if s.strip()]:
        langs[lang] = language(lang)
        methods = [m for m in next(iter(langs.values())) if isinstance(langs[lang][m], dict) and "f1_at" in langs[lang][m]]
        keys = [*(str(n) for n in BUDGETS), "all"]
        report.update({
            "what": __doc__.split("\n\n")[0].replace("\n", " "), "methods": methods, "draws": DRAWS,
            "languages": langs,
            "means": {m: {k: round(float(np.mean([r[m]["f1_at"][k] for r in langs.values()])), 4) for k in keys}
                      for m in methods},
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
            "date": time.strftime("%Y-%m-%d"), "machine": {"cores": os.cpu_count(),
                                                            "load_average": [round(x, 2) for x in os.getloadavg()]},
            "command": " ".join(["python bench/studies/code_transforms.py", *sys.argv[1:]])})
        OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report.get("means"), indent=1))


if __name__ == "__main__":
    main()
