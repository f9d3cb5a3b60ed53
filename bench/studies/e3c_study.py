"""What the E3C readout studies share: the budgets and draws, each method scored on them, the command line
(`--languages`), one report file updated a language at a time (each language's figures, the four languages' means
of every method, commit, date, machine, command), and the TF-IDF baseline's F1 on a draw (bench/real_text.py's
split and draws; the product's `_fit_tfidf`)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = (50, 100, 200)
DRAWS = 10


Predict = Callable[[np.ndarray, np.ndarray, int], dict[str, np.ndarray]]
"""(training rows, held-out rows, draw) -> each method's 0/1 predictions on the held-out rows."""


def score_draws(lang: str, ds: Any, methods: list[str], predict: Predict) -> dict[str, Any]:
    """Every method's F1 on the held-out sentences of bench/real_text.py's split, at each budget's draws: `predict`'s
    methods, and TF-IDF + LR where `methods` lists "tfidf_lr"; each budget's means printed as it ends."""
    from bench.real_sets import group_split
    from gateway.domain.concepts.readout import f1_of

    train, test = group_split(ds)
    scores: dict[str, dict[str, list[float]]] = {m: {} for m in methods}
    for n, draws in budgets(train, ds.y):
        for d, rows in enumerate(draws):
            preds = predict(rows, test, d)
            if "tfidf_lr" in methods:
                scores["tfidf_lr"].setdefault(n, []).append(tfidf_f1(ds.texts, ds.y, rows, test, d))
            for m, pred in preds.items():
                scores[m].setdefault(n, []).append(f1_of(ds.y[test], np.asarray(pred, np.int64)))
        print(f"  {lang} {n}: " + ", ".join(f"{m} {np.mean(scores[m][n]):.3f}" for m in methods), flush=True)
    return {"test_sentences": len(test), "train_sentences": len(train), **summary(scores)}


def budgets(train: np.ndarray, y: np.ndarray) -> Iterator[tuple[str, list[np.ndarray]]]:
    """(budget, its training rows): DRAWS seeded draws at each of BUDGETS labels (bench/real_text.py's `draw`), and
    every training label once ("all")."""
    from bench.real_text import draw

    for n in [*BUDGETS, "all"]:
        yield str(n), [train] if n == "all" else [draw(train, y, n, d) for d in range(DRAWS)]


def tfidf_f1(texts: list[str], y: np.ndarray, rows: np.ndarray, test: np.ndarray, seed: int) -> float:
    """F1 on the held-out rows of TF-IDF + LR fitted on `rows` (as a probe concept's page computes it)."""
    from gateway.domain.concepts.baselines import _fit_tfidf
    from gateway.domain.concepts.readout import f1_of

    tfidf = _fit_tfidf([texts[i] for i in rows], y[rows], seed)
    pred = (np.zeros(len(test), np.int64) if tfidf is None
            else tfidf[1].predict(tfidf[0].transform([texts[i] for i in test])).astype(np.int64))
    return f1_of(y[test], pred)


def summary(scores: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Each method's mean F1 and its standard deviation over the draws, by budget."""
    return {m: {"f1_at": {k: round(float(np.mean(v)), 4) for k, v in s.items()},
                "sd": {k: round(float(np.std(v)), 4) for k, v in s.items()}} for m, s in scores.items()}


def main(doc: str, out: Path, methods: list[str], language: Callable[[str], dict[str, Any]], script: str) -> None:
    """Run `language` for each of --languages and keep `out` up to date after each."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--languages", default="en,es,fr,eu")
    args = parser.parse_args()
    report = json.loads(out.read_text()) if out.exists() else {}
    langs = report.get("languages", {})
    keys = [*(str(n) for n in BUDGETS), "all"]
    for lang in [s.strip() for s in args.languages.split(",") if s.strip()]:
        langs[lang] = language(lang)
        report.update({
            "what": doc.split("\n\n")[0].replace("\n", " "), "methods": methods, "draws": DRAWS, "languages": langs,
            "means": {m: {k: round(float(np.mean([r[m]["f1_at"][k] for r in langs.values()])), 4) for k in keys}
                      for m in methods},
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
            "date": time.strftime("%Y-%m-%d"), "machine": {"cores": os.cpu_count(),
                                                            "load_average": [round(x, 2) for x in os.getloadavg()]},
            "command": " ".join([f"python {script}", *sys.argv[1:]])})
        out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report.get("means"), indent=1))
