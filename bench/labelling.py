"""Labelling benchmark → bench/results/labelling.json: does the product's labelling queue get a concept further
with the same number of labels than labelling notes at random, and is the F1 its concept page shows honest?

A simulated annotator answers the queue from the hidden label column, a batch of 10 at a time (smaller just
before a checkpoint), on six sets of bench/real_sets.py, each one dataset with the product's default embedding
and SAE runs: demo (2,000 generated notes, positive = confirmed bronchiolitis), negex (positive = Affirmed, as
bench/status.py reads it), e3c-en/es/fr/eu (layer-1 sentences, positive = not_actual; the layer-3 cases of the
same dataset never enter the queue nor the evaluation). One fixed held-out 25 % (E3C: by case; the same split
as bench/real_text.py) never enters the queue, which draws only from the labelled training part.

The queue is the product's policy, `gateway.domain.labels.policy.plan_batch` with `QueuePolicy()`: before both
classes have a label, the seed's hits then near misses; after, the current readout's most uncertain notes spread
by k-means++; a random share in every batch. The seed is what a user would type, as a keyword search:
  - e3c-<lang>: the language's negation words (bench/cue_regex.py NEGATION); negex: the English ones;
  - demo: `bronchiolit`;
hits = the training notes the keyword matches, most matches first (ties: dataset order), at most 200 (the
product's SEED_HITS); near misses = the notes it misses whose dense document vector is closest (cosine) to the
hits' mean vector, at most 200 (a keyword has no scores below its cut; this stands in for the product's
"activation on the features it reads").
After each batch the readout (`gateway.domain.concepts.readout.fit_readout`) is refitted on all labels so far,
and its P(positive) over every document feeds the next batch. At 25, 50, 100, 200 and 400 labels, held-out F1 of:
  queue: the readout on the queue's labels;  random: the readout on as many uniformly random training labels;
  tfidf_queue / tfidf_random: the product's TF-IDF baseline (`baselines._fit_tfidf`) on the same labels.
10 seeds each. `queue.estimate_at`: what the concept page shows (`gateway.domain.labels.training.estimate`: F1 of
the readout's out-of-fold decisions, on the random-share labels alone once there are >= 20, else over all),
beside the held-out F1 of the same fit. `retrain_seconds_p95_1000_labels`: fit_readout + estimate on 1,000
labels of the largest set, this machine.

    nice -n 10 python bench/labelling.py --sets demo,negex,e3c-en
    nice -n 10 python bench/labelling.py --variants pool=1 random_share=0.5     # beside the default, own key
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.cue_regex import NEGATION_CUES
from bench.real_sets import SETS, group_split, prepare
from bench.real_text import machine, readout_fit, readout_p
from gateway.domain.concepts.baselines import _fit_tfidf
from gateway.domain.concepts.readout import f1_of
from gateway.domain.labels.policy import QueuePolicy, plan_batch
from gateway.domain.labels.training import estimate

RESULTS = ROOT / "bench/results/labelling.json"
CHECKPOINTS = (25, 50, 100, 200, 400)
BATCH = 10
SEEDS = 10
SEED_HITS = 200
METHODS = ("queue", "random", "tfidf_queue", "tfidf_random")


def keyword(name: str) -> tuple[str, Any]:
    """(what the user typed, a function text -> matches) for the set's seed."""
    if name == "demo":
        import re

        pattern = re.compile(r"bronchiolit", re.IGNORECASE)
        return "bronchiolit", lambda t: len(pattern.findall(t))
    lang = "en" if name == "negex" else name[4:]
    return NEGATION_CUES[lang].pattern, lambda t: len(NEGATION_CUES[lang].findall(t))


def seed_ranking(ds: Any, train: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    typed, count = keyword(ds.name)
    score = np.array([count(ds.texts[i]) for i in train])
    hits = train[np.argsort(-score, kind="stable")][: min(SEED_HITS, int((score > 0).sum()))]
    rest = train[score == 0]
    centre = ds.dense[hits].mean(0)
    near = rest[np.argsort(-(ds.dense[rest] @ centre), kind="stable")][:SEED_HITS]
    y = ds.y[hits]
    return hits, near, {"typed": typed, "hits": int((score > 0).sum()), "hits_used": len(hits),
                        "hit_positive_share": round(float(y.mean()), 3) if len(y) else None}


def readout_f1(ds: Any, labelled: np.ndarray, test: np.ndarray, seed: int) -> tuple[float, Any]:
    y = ds.y[labelled]
    if y.min() == y.max():  # one class only: nothing to fit; every note gets that class
        return f1_of(ds.y[test], np.full(len(test), y[0])), None
    fitted = readout_fit(ds.codes[labelled], y, seed)
    return f1_of(ds.y[test], (readout_p(fitted, ds.codes[test]) >= 0.5).astype(np.int64)), fitted


def tfidf_f1(ds: Any, labelled: np.ndarray, test: np.ndarray, seed: int) -> float:
    y = ds.y[labelled]
    model = _fit_tfidf([ds.texts[i] for i in labelled], y, seed) if y.min() != y.max() else None
    if model is None:
        return f1_of(ds.y[test], np.full(len(test), y[0]))
    return f1_of(ds.y[test], model[1].predict(model[0].transform([ds.texts[i] for i in test])).astype(np.int64))


def simulate(ds: Any, train: np.ndarray, test: np.ndarray, seed: int, policy: QueuePolicy,
             hits: np.ndarray, near: np.ndarray, with_tfidf: bool = True) -> dict[int, dict]:
    """The queue answered from the hidden labels up to the last checkpoint: figures at each checkpoint."""
    open_ = np.zeros(len(ds.y), dtype=bool)
    open_[train] = True
    rng = np.random.default_rng(seed)
    labelled: list[int] = []
    reasons: list[str] = []
    probability, out = None, {}
    while len(labelled) < CHECKPOINTS[-1]:
        goal = next(c for c in CHECKPOINTS if c > len(labelled))
        picks = plan_batch(min(BATCH, goal - len(labelled)), open_=open_, rng=rng, policy=policy,
                           probability=probability, codes=ds.codes if probability is not None else None,
                           seed_hits=hits, seed_near=near)
        for p in picks:
            labelled.append(p.position)
            reasons.append(p.reason)
            open_[p.position] = False
        positions = np.array(labelled)
        f1, fitted = readout_f1(ds, positions, test, seed)
        if fitted is not None:
            probability = readout_p(fitted, ds.codes)
        if len(labelled) in CHECKPOINTS:
            random = np.array([r == "random" for r in reasons])
            shown, cv = (None, None) if fitted is None else estimate(
                ds.y[positions], fitted, ds.codes[positions], random, ds.codes[np.flatnonzero(open_)])
            out[len(labelled)] = {"f1": f1, "estimate": None if shown is None else shown["f1"],
                                  "estimate_cv": None if cv is None else cv["f1"],
                                  "basis": None if shown is None else shown["basis"],
                                  "positives": int(ds.y[positions].sum()),
                                  "readout": getattr(fitted, "readout", "row_l2") if fitted is not None else None,
                                  "reasons": {r: reasons.count(r) for r in set(reasons)},
                                  "tfidf": tfidf_f1(ds, positions, test, seed) if with_tfidf else None}
    return out


def random_arm(ds: Any, train: np.ndarray, test: np.ndarray, seed: int) -> dict[int, dict]:
    order = np.random.default_rng(10_000 + seed).permutation(train)
    return {n: {"f1": readout_f1(ds, order[:n], test, seed)[0], "tfidf": tfidf_f1(ds, order[:n], test, seed)}
            for n in CHECKPOINTS}


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(float(np.mean(kept)), 4) if kept else None


def run_set(name: str, policy: QueuePolicy, with_baselines: bool = True) -> dict:
    ds = prepare(name)
    train, test = group_split(ds)
    hits, near, seed_info = seed_ranking(ds, train)
    t0 = time.perf_counter()
    queue = [simulate(ds, train, test, s, policy, hits, near, with_baselines) for s in range(SEEDS)]
    rand = [random_arm(ds, train, test, s) for s in range(SEEDS)] if with_baselines else []
    keys = [str(n) for n in CHECKPOINTS]
    est = {n: {"estimate": _mean([q[n]["estimate"] for q in queue]), "heldout_f1": _mean([q[n]["f1"] for q in queue]),
               "mean_abs_difference": _mean([abs(q[n]["estimate"] - q[n]["f1"]) for q in queue
                                             if q[n]["estimate"] is not None]),
               "basis": sorted({q[n]["basis"] for q in queue if q[n]["basis"]}),
               "cv_all_labels": _mean([q[n]["estimate_cv"] for q in queue]),
               "cv_all_labels_mean_abs_difference": _mean([abs(q[n]["estimate_cv"] - q[n]["f1"]) for q in queue
                                                           if q[n]["estimate_cv"] is not None]),
               "random_labels_mean": _mean([q[n]["reasons"].get("random", 0) for q in queue])} for n in CHECKPOINTS}
    out: dict[str, Any] = {
        "data": {"documents_in_dataset": len(ds.y), "labelled": len(ds.labelled), "train": len(train),
                 "test": len(test), "test_positives": int(ds.y[test].sum()), "train_positive_share":
                 round(float(ds.y[train].mean()), 3), **ds.description["data"]},
        "seed": seed_info, "policy": policy.describe(),
        "queue": {"f1_at": dict(zip(keys, (_mean([q[n]["f1"] for q in queue]) for n in CHECKPOINTS))),
                  "sd": dict(zip(keys, (round(float(np.std([q[n]["f1"] for q in queue])), 4) for n in CHECKPOINTS))),
                  "estimate_at": dict(zip(keys, est.values())),
                  "positives_at": dict(zip(keys, (_mean([q[n]["positives"] for q in queue]) for n in CHECKPOINTS))),
                  "readout_picked_at": {k: {r: sum(q[n]["readout"] == r for q in queue) for r in
                                            sorted({q[n]["readout"] for q in queue if q[n]["readout"]})}
                                        for k, n in zip(keys, CHECKPOINTS)},
                  "reasons_at_400": {r: _mean([q[400]["reasons"].get(r, 0) for q in queue])
                                     for r in ("seed", "near_miss", "uncertain", "random")}},
        "seconds": None,
    }
    if with_baselines:
        out["tfidf_queue"] = {"f1_at": {k: _mean([q[n]["tfidf"] for q in queue]) for k, n in zip(keys, CHECKPOINTS)}}
        out["random"] = {"f1_at": {k: _mean([r[n]["f1"] for r in rand]) for k, n in zip(keys, CHECKPOINTS)},
                         "sd": {k: round(float(np.std([r[n]["f1"] for r in rand])), 4) for k, n in zip(keys, CHECKPOINTS)}}
        out["tfidf_random"] = {"f1_at": {k: _mean([r[n]["tfidf"] for r in rand]) for k, n in zip(keys, CHECKPOINTS)}}
        out["sae"], out["embedding"] = ds.description["sae"], ds.description["embedding"]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"  {name}: " + "  ".join(f"{m} " + " ".join(f"{v}" for v in out[m]["f1_at"].values())
                                    for m in METHODS if m in out), flush=True)
    return out


def retrain_p95(name: str, repeats: int = 20) -> dict:
    """fit_readout + the estimate on 1,000 labels drawn from the set's labelled rows (a fifth marked random)."""
    ds = prepare(name)
    times = []
    for r in range(repeats):
        rng = np.random.default_rng(r)
        chosen = rng.choice(ds.labelled, size=min(1000, len(ds.labelled)), replace=False)
        random = rng.random(len(chosen)) < 0.2
        t0 = time.perf_counter()
        fitted = readout_fit(ds.codes[chosen], ds.y[chosen], r)
        rest = np.setdiff1d(np.arange(len(ds.y)), chosen)  # the notes nobody labelled: the estimate's pool
        estimate(ds.y[chosen], fitted, ds.codes[chosen], random, ds.codes[rest])
        times.append(time.perf_counter() - t0)
    return {"set": name, "labels": min(1000, len(ds.labelled)), "repeats": repeats,
            "load_average_1m": round(os.getloadavg()[0], 2), "readout": "fit_readout as the product calls it",
            "p95": round(float(np.percentile(times, 95)), 3), "median": round(float(np.median(times)), 3)}


def goals(sets: dict[str, dict], retrain: dict | None) -> dict:
    f1 = lambda s, m, n: sets[s][m]["f1_at"][n]
    beat_random = {s: {"queue_at_100": f1(s, "queue", "100"), "random_at_200": f1(s, "random", "200"),
                       "met": f1(s, "queue", "100") >= f1(s, "random", "200")} for s in sets}
    beat_tfidf = {s: {n: {"queue": f1(s, "queue", n), "tfidf_queue": f1(s, "tfidf_queue", n)} for n in ("50", "100", "200")}
                  for s in sets}
    for r in beat_tfidf.values():
        r["met"] = all(v["queue"] >= v["tfidf_queue"] for v in r.values())
    honest = {s: {k: sets[s]["queue"]["estimate_at"]["200"][k] for k in ("estimate", "heldout_f1", "mean_abs_difference",
                                                                         "basis")} for s in sets}
    for r in honest.values():
        r["met"] = r["mean_abs_difference"] is not None and r["mean_abs_difference"] <= 0.05
    return {
        "queue_at_100_ge_random_at_200_on_4_of_6": {"met": sum(r["met"] for r in beat_random.values()) >= 4,
                                                    "sets_met": sum(r["met"] for r in beat_random.values()),
                                                    "per_set": beat_random},
        "queue_ge_tfidf_queue_at_50_100_200_on_4_of_6": {"met": sum(r["met"] for r in beat_tfidf.values()) >= 4,
                                                         "sets_met": sum(r["met"] for r in beat_tfidf.values()),
                                                         "per_set": beat_tfidf},
        "estimate_within_0.05_at_200_every_set": {
            "met": all(r["met"] for r in honest.values()), "per_set": honest,
            "figure": "mean over seeds of |estimate - held-out F1| of the same fit"},
        "retrain_p95_le_1_s": {"met": retrain is not None and retrain["p95"] <= 1.0, "figures": retrain},
    }


def parse_variant(text: str) -> QueuePolicy:
    fields = dict(part.split("=") for part in text.split(",") if part)
    kinds = {"random_share": float, "near_miss_share": float, "pool": int}
    return QueuePolicy(**{k: kinds[k](v) for k, v in fields.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--variants", nargs="*", default=[],
                        help="QueuePolicy variants (e.g. pool=1 random_share=0.5,pool=3): the queue arm only, "
                             "under `policy_variants`, on the same sets")
    parser.add_argument("--no-default", action="store_true", help="only the variants (keep the file's default runs)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    wanted = [s.strip() for s in args.sets.split(",") if s.strip()]
    report = json.loads(args.out.read_text()) if args.out.exists() else {}
    sets = report.get("sets", {})
    if not args.no_default:
        for name in wanted:
            sets[name] = run_set(name, QueuePolicy())
            sets = {k: sets[k] for k in SETS if k in sets}
            report["sets"] = sets
            write(args.out, report, None)
        largest = max(sets, key=lambda s: sets[s]["data"]["labelled"])
        write(args.out, report, retrain_p95(largest))
    for variant in args.variants:
        policy = parse_variant(variant)
        runs = report.setdefault("policy_variants", {}).setdefault(variant, {"policy": policy.describe(), "sets": {}})
        for name in wanted:
            runs["sets"][name] = run_set(name, policy, with_baselines=False)
            write(args.out, report, report.get("retrain_seconds_p95_1000_labels"))


def write(out: Path, report: dict, retrain: dict | None) -> None:
    import subprocess

    sets = report.setdefault("sets", {})
    keys = [str(n) for n in CHECKPOINTS]
    report.update({
        "what": __doc__.split("\n\n")[0].replace("\n", " "),
        "checkpoints": keys, "seeds": SEEDS, "batch": BATCH, "methods": list(METHODS),
        "policy_default": QueuePolicy().describe(),
        "missing_sets": [s for s in SETS if s not in sets],
        "means": {m: {"f1_at": {k: _mean([r[m]["f1_at"][k] for r in sets.values() if m in r]) for k in keys}}
                  for m in METHODS},
        "retrain_seconds_p95_1000_labels": retrain or report.get("retrain_seconds_p95_1000_labels"),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(),
        "command": " ".join(["python bench/labelling.py", *sys.argv[1:]]),
    })
    report["goals"] = goals(sets, report["retrain_seconds_p95_1000_labels"]) if sets else {}
    report["goals"]["sets_measured"] = list(sets)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
