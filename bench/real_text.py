"""E3C benchmark → bench/results/e3c.json: on real clinical sentences in four languages, how well does the
product's probe on its SAE codes tell a negated / hedged / hypothetical finding (`not_actual`) from a fact,
with 50 to all training labels, beside TF-IDF, dense vectors and a cue regex?

Per language (en, es, fr, eu): the dataset of bench/real_sets.py (layer-1 sentences with their hidden label
plus a character-capped sample of layer-3 cases, unlabelled; the product's default embedding and SAE runs
through its API in embedded mode, cached in /tmp/prisma-bench/real/<set>). One fixed split by case (`doc`):
25 % of the layer-1 sentences held out, the same for every method and budget. Training labels: 10 seeded
uniform draws from the training sentences at 50, 100, 200 and 400 labels, and all of them (one draw: the
fits are seeded alike). F1 of `not_actual` on the held-out sentences for:
  - probe: the product's probe concept's fit, `gateway.domain.concepts.readout.fit_readout` (rows L2-normalised
    with an L2 logistic regression, or the raw codes with an L1 one, the readout and C chosen by inner CV on the
    draw's labels; `readout_picked` counts which won) on the SAE run's document codes, P >= 0.5 on the held-out
    codes: the product's own function on the run's codes, not POST /api/v1/concepts (a concept per draw, 164 per
    language with their apply jobs, does not fit this machine's time; the concept's own held-out split would also
    take a quarter of each draw's labels away);
  - probe_l1: `gateway.domain.concepts.probe.fit_probe` (L1 logistic regression, C by CV, one-standard-error
    rule), the probe concepts' readout before this one;
  - probe_l2: `fit_readout` with its row-L2 readout alone;
  - tfidf_lr: the product's TF-IDF baseline (`baselines._fit_tfidf`: word 1-2-grams, balanced LR, C by CV);
  - dense_lr: balanced L2 logistic regression on the embedding run's document vectors, C by stratified CV on F1;
  - regex: bench/cue_regex.py's negation and hedging cues of the language (no training; the same every budget).
`goals` are checked on every language and on the means.

    nice -n 10 python bench/real_text.py                  # en, es, fr, eu (each prepared once, then cached)
    nice -n 10 python bench/real_text.py --languages en
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.cue_regex import CUES, cue_regex
from bench import real_sets
from bench.real_sets import LANGUAGES, LAYER3_CHARS, group_split, prepare
from gateway.domain.concepts.baselines import _fit_tfidf
from gateway.domain.concepts.probe import fit_probe
from gateway.domain.concepts.readout import f1_of

RESULTS = ROOT / "bench/results/e3c.json"
BUDGETS = (50, 100, 200, 400)
DRAWS = 10
METHODS = ("probe", "probe_l1", "probe_l2", "tfidf_lr", "dense_lr", "regex")
DENSE_CS = np.logspace(-2, 3, 6)


def readout_fit(codes: Any, y: np.ndarray, seed: int, only_l2: bool = False) -> Any:
    """`fit_readout` of gateway/domain/concepts/readout.py: with only_l2, its row-L2 readout alone (probe_l2);
    else as the product calls it (today: row_l2 and l1 compete by CV)."""
    from gateway.domain.concepts import readout

    if only_l2 and hasattr(readout, "READOUTS"):
        return readout.fit_readout(codes, y, seed=seed, readouts={"row_l2": readout.READOUTS["row_l2"]})
    return readout.fit_readout(codes, y, seed=seed)


def readout_p(fitted: Any, codes: Any) -> np.ndarray:
    """P(positive) [rows] of a fitted readout (its own `probability`, or the older module's function)."""
    from gateway.domain.concepts import readout

    if hasattr(fitted, "probability"):
        return fitted.probability(codes)
    return readout.readout_probability(fitted.probe.coef.ravel(), float(fitted.probe.intercept[0]), codes)


def dense_lr(x: np.ndarray, y: np.ndarray, seed: int) -> Any:
    """Balanced L2 logistic regression, C by stratified k-fold CV on F1 (k: 5, or the smaller class's count)."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    folds = max(2, min(5, int(np.bincount(y, minlength=2).min())))
    model = LogisticRegressionCV(Cs=DENSE_CS, class_weight="balanced", scoring="f1", max_iter=3000,
                                 cv=StratifiedKFold(folds, shuffle=True, random_state=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(x, y)


def predictions(ds: Any, train: np.ndarray, test: np.ndarray, seed: int, chosen: list) -> dict[str, np.ndarray]:
    """Each trained method's 0/1 on the test positions, fitted on the train positions only (`chosen` gets the
    readout the product's fit_readout picked)."""
    y = ds.y[train]
    out = {}
    fitted = readout_fit(ds.codes[train], y, seed)
    out["probe"] = (readout_p(fitted, ds.codes[test]) >= 0.5).astype(np.int64)
    chosen.append(getattr(fitted, "readout", "row_l2"))
    l1 = fit_probe(ds.codes[train], y, seed=seed)
    out["probe_l1"] = np.asarray(l1.predict(ds.codes[test]), dtype=np.int64)
    out["probe_l2"] = (readout_p(readout_fit(ds.codes[train], y, seed, only_l2=True), ds.codes[test]) >= 0.5).astype(
        np.int64)
    tfidf = _fit_tfidf([ds.texts[i] for i in train], y, seed)
    out["tfidf_lr"] = (np.zeros(len(test), np.int64) if tfidf is None
                       else tfidf[1].predict(tfidf[0].transform([ds.texts[i] for i in test])).astype(np.int64))
    out["dense_lr"] = dense_lr(ds.dense[train], y, seed).predict(ds.dense[test]).astype(np.int64)
    return out


def draw(train: np.ndarray, y: np.ndarray, n: int, seed: int) -> np.ndarray:
    """n training positions drawn uniformly (seeded), redrawn (next seed) until each class has two."""
    for attempt in range(100):
        chosen = np.random.default_rng(seed * 1000 + attempt).choice(train, size=n, replace=False)
        if min(int(y[chosen].sum()), int(n - y[chosen].sum())) >= 2:
            return np.sort(chosen)
    raise RuntimeError(f"no draw of {n} with both classes")


def run_language(lang: str, cap: int) -> dict:
    t0 = time.perf_counter()
    ds = prepare(f"e3c-{lang}", cap)
    prepared_s = time.perf_counter() - t0
    train, test = group_split(ds)
    y_test = ds.y[test]
    scores: dict[str, dict[str, list[float]]] = {m: {} for m in METHODS}
    regex_f1 = f1_of(y_test, np.array([cue_regex(lang, ds.texts[i]) for i in test]))
    picked: dict[str, list[str]] = {}
    t1 = time.perf_counter()
    for n in [*BUDGETS, "all"]:
        draws = [train] if n == "all" else [draw(train, ds.y, n, d) for d in range(DRAWS)]
        for d, rows in enumerate(draws):
            for method, pred in predictions(ds, rows, test, d, picked.setdefault(str(n), [])).items():
                scores[method].setdefault(str(n), []).append(f1_of(y_test, pred))
            scores["regex"].setdefault(str(n), []).append(regex_f1)
        print(f"  {lang} {n}: " + ", ".join(f"{m} {np.mean(scores[m][str(n)]):.3f}" for m in METHODS), flush=True)
    d = ds.description
    return {
        "data": d["data"] | {"documents_in_dataset": d["documents"], "segments": d["segments"],
                             "train_sentences": len(train), "test_sentences": len(test),
                             "test_positives": int(y_test.sum()),
                             "test_cases": len(np.unique(ds.group[test])), "train_cases": len(np.unique(ds.group[train])),
                             "split": "by case (doc), seeded order (seed 0), cases held out until >= 25 % of sentences"},
        "embedding": d["embedding"], "sae": d["sae"], "preparation_seconds": d["preparation_seconds"],
        "benchmark_seconds": round(time.perf_counter() - t1, 1), "load_seconds": round(prepared_s, 1),
        **{m: {"f1_at": {k: round(float(np.mean(v)), 4) for k, v in scores[m].items()},
               "sd": {k: round(float(np.std(v)), 4) for k, v in scores[m].items()},
               "draws": {k: len(v) for k, v in scores[m].items()}} for m in METHODS},
        "regex_pattern": CUES[lang].pattern,
        "readout_picked": {n: {r: v.count(r) for r in sorted(set(v))} for n, v in picked.items()},
    }


def goals(langs: dict[str, dict], means: dict[str, dict], probe: str = "probe") -> dict:
    def at(src: dict, m: str, n: str) -> float:
        return src[m]["f1_at"][n]

    few = {lang: {n: {probe: at(r, probe, n), "tfidf_lr": at(r, "tfidf_lr", n),
                      "difference": round(at(r, probe, n) - at(r, "tfidf_lr", n), 4)} for n in ("50", "100", "200")}
           for lang, r in langs.items()}
    all_tfidf = {lang: {probe: at(r, probe, "all"), "tfidf_lr": at(r, "tfidf_lr", "all"),
                        "difference": round(at(r, probe, "all") - at(r, "tfidf_lr", "all"), 4)} for lang, r in langs.items()}
    all_dense = {lang: {probe: at(r, probe, "all"), "dense_lr": at(r, "dense_lr", "all"),
                        "difference": round(at(r, probe, "all") - at(r, "dense_lr", "all"), 4)} for lang, r in langs.items()}
    mean_few = {n: round(at(means, probe, n) - at(means, "tfidf_lr", n), 4) for n in ("50", "100", "200")}
    return {
        f"{probe}_ge_tfidf_plus_0.15_at_50_100_200": {
            "met": all(v["difference"] >= 0.15 for r in few.values() for v in r.values()),
            "met_on_means": all(v >= 0.15 for v in mean_few.values()), "means_difference": mean_few, "per_language": few},
        f"{probe}_ge_tfidf_plus_0.03_all_labels_each_language": {
            "met": all(v["difference"] >= 0.03 for v in all_tfidf.values()), "per_language": all_tfidf},
        f"{probe}_ge_dense_lr_all_labels": {
            "met": all(v["difference"] >= 0 for v in all_dense.values()),
            "met_on_means": at(means, probe, "all") >= at(means, "dense_lr", "all"), "per_language": all_dense},
    }


def machine() -> dict:
    lscpu = subprocess.run(["lscpu"], check=False, capture_output=True, text=True).stdout
    name = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), None)
    return {"cpu_model_name": name, "cores": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "note": "2 cores shared with other engineers' work; run under nice -n 10"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--layer3-chars", type=int, default=LAYER3_CHARS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--segment-unit", default="clause", help="the embedding run's segment unit: clause (the "
                        "product's default), sentence, word or token")
    parser.add_argument("--word-states", action="store_true", help="the embedding run keeps its words (word_states): "
                        "the SAE reads each segment by them; cached apart (/tmp/prisma-bench/real-word-states)")
    args = parser.parse_args()
    real_sets.use_segment_unit(args.segment_unit)
    if args.word_states:
        real_sets.use_word_states()
    wanted = [s.strip() for s in args.languages.split(",") if s.strip()]
    report = json.loads(args.out.read_text()) if args.out.exists() else {}
    langs = report.get("languages", {})
    for lang in wanted:
        langs[lang] = run_language(lang, args.layer3_chars)
        langs = {k: langs[k] for k in LANGUAGES if k in langs}
        write(args.out, report, langs, args.layer3_chars)
    print(json.dumps({lang: {m: r[m]["f1_at"] for m in METHODS} for lang, r in langs.items()}, indent=1))


def write(out: Path, report: dict, langs: dict, cap: int) -> None:
    keys = [*(str(n) for n in BUDGETS), "all"]
    means = {m: {"f1_at": {k: round(float(np.mean([r[m]["f1_at"][k] for r in langs.values()])), 4) for k in keys}}
             for m in METHODS}
    report.update({
        "what": __doc__.split("\n\n")[0].replace("\n", " "),
        "positive": "not_actual", "budgets": keys, "draws": DRAWS, "methods": list(METHODS),
        "probe_path": "gateway.domain.concepts.readout.fit_readout on the SAE run's codes (the product's probe "
                      "function, called directly, not through POST /api/v1/concepts)",
        "layer3_cap_chars": cap, "embedding_request": real_sets.EMBEDDING,
        "languages": langs, "missing_languages": [lang for lang in LANGUAGES if lang not in langs],
        "means": {"languages": list(langs), **means},
        "goals": goals(langs, means), "goals_probe_l1": goals(langs, means, "probe_l1"),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(),
        "command": " ".join(["python bench/real_text.py", *sys.argv[1:]]),
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
