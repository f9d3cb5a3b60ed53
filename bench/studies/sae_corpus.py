"""What the SAE needs to learn on real clinical text: how many unlabelled cases, what size, what schedule and what
vectors, judged by the product's default probe readout on E3C `not_actual`.

Per language (bench/real_sets.py's cached dataset e3c-<lang>: the layer-1 sentences, then the seeded 1 M-character
sample of layer-3 cases, embedded by the product's default run; its document vectors and clause vectors are read
from the cached deployment), SAEs are trained in-process by the product's trainer (`services.sae.trainer.SaeTrainer`,
every step of its schedule, one thread), on the vectors `services.sae.segments.training_vectors` picks for the
config, from the product's default `SaeConfig()` resolved as a run with clause segments resolves it
(expansion 8, k 32, 50 epochs, segments and documents, document codes the max over their clauses):
  - curve: the sentences plus the first 0, 100, 300, 1,000 and all cached layer-3 cases (always the sentences:
    they are in the same dataset, as in the product's run);
  - variants, every cached case, one setting changed at a time: expansion 4 / 16, k 16 / 64, twice the steps
    (100 epochs, the same warm-up and linear decay to the last step), trained on documents or on segments alone,
    and the default again with SAE seeds 1 and 2 (initialisation and data order only: the noise of training); each
    variant again with SAE seed 1 (`--only "k=64 seed1",...`), read against the default on the same two seeds;
  - the curve again with SAE seeds 1 and 2 (`--only curve_seed1,curve_seed2`), and its mean over the three seeds;
  - batches of 256 and 512 rows at their default rates (the rule; twice it), SAE seeds 0, 1 and 2 each
    (`batch_size=<rows> seed<s>`; `batches`: means, and 512 minus 256 seed by seed);
  - the encoder's matmul in fp32 and in bf16, SAE seeds 0, 1 and 2 each (`precision=<p> seed<s>`; `precisions`:
    means, and bf16 minus fp32 seed by seed).
Held-out FVU: one fixed hold-out for every SAE, the product's own 10 % split of the whole cached dataset
(`holdout_split`, seed 0; at the full corpus it is exactly the product's run's): those documents' clause and
document vectors are never trained on, and FVU is read on both (the default's own measure), on each kind alone, and
on the held-out sentences and cases apart. Training documents of a curve point: the product's training rows that
are among the point's first documents.
Readout: the sentences' codes (max over their clauses, `pooled_codes`), read by
`gateway.domain.concepts.readout.fit_readout` exactly as bench/real_text.py calls it (`readout_fit`, P >= 0.5),
on bench/real_text.py's split (`group_split`) and draws (`draw`): 100 labels (10 draws, the same for every SAE, so
differences are paired draw by draw) and all training labels. Beside it, on the same draws and by the same
functions: TF-IDF + LR (`baselines._fit_tfidf`), dense LR on the run's document vectors (`real_text.dense_lr`),
and the readout on the product run's own cached codes (bench/results/e3c.json's probe).

    nice -n 10 .venv/bin/python bench/studies/sae_corpus.py --languages en
    nice -n 10 .venv/bin/python bench/studies/sae_corpus.py --languages en --only curve_seed1,curve_seed2
    nice -n 10 .venv/bin/python bench/studies/sae_corpus.py --languages en --out bench/studies/results/sae-batch-en.json \
        --only "batch_size=256 seed0,batch_size=256 seed1,batch_size=256 seed2,batch_size=512 seed0,..."

Writes bench/studies/results/sae-corpus.json (after every SAE, so a stopped run keeps what it finished; a run
skips what the file already holds, and `--only none` recomputes the summaries alone).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import CACHE, group_split, prepare  # noqa: E402
from bench.real_text import dense_lr, draw, machine, readout_fit, readout_p  # noqa: E402
from contracts.sae import SaeConfig  # noqa: E402
from gateway.domain.concepts.baselines import _fit_tfidf  # noqa: E402
from gateway.domain.concepts.readout import f1_of  # noqa: E402
from services.sae.segments import ARRAYS as SEGMENT_ARRAYS, Segments, pooled_codes, training_vectors  # noqa: E402
from services.sae.trainer import SaeTrainer, holdout_metrics, holdout_split  # noqa: E402

OUT = ROOT / "bench/studies/results/sae-corpus.json"
CASES = (0, 100, 300, 1000, None)  # None: every cached case
VARIANTS = {
    "default_seed1": {"seed": 1}, "k=16": {"k": 16}, "k=64": {"k": 64},
    "expansion_factor=4": {"expansion_factor": 4}, "expansion_factor=16": {"expansion_factor": 16},
    "steps x2 (epochs=100)": {"epochs": 100}, "train_on=documents": {"train_on": "documents"},
    "train_on=segments": {"train_on": "segments"}, "default_seed2": {"seed": 2},
}
REPEATED = ("k=16", "k=64", "expansion_factor=4", "expansion_factor=16", "steps x2 (epochs=100)", "train_on=segments",
            "train_on=documents")
VARIANTS |= {f"{name} seed1": {**VARIANTS[name], "seed": 1} for name in REPEATED}
"""Each variant again with SAE seed 1, to be read against the default's seeds 0 and 1 (`variants_over_sae_seeds`)."""
BATCHES, BATCH_SEEDS = (256, 512), (0, 1, 2)
VARIANTS |= {f"batch_size={b} seed{s}": {"batch_size": b, "seed": s} for b in BATCHES for s in BATCH_SEEDS}
"""Batches of 256 and 512 rows, each at its default rate (the rule; twice it), over three SAE seeds (`batches`)."""
PRECISIONS, PRECISION_SEEDS = ("fp32", "bf16"), (0, 1, 2)
VARIANTS |= {f"precision={p} seed{s}": {"precision": p, "seed": s} for p in PRECISIONS for s in PRECISION_SEEDS}
"""The encoder's matmul in fp32 and in bf16 (SaeConfig.precision; 'auto' picks bf16 on a CPU with native bf16),
over three SAE seeds (`precisions`)."""
CURVE_SEEDS = (1, 2)  # the curve again with these SAE seeds (--only curve_seed1,curve_seed2)
DRAWS, LABELS = 10, 100


def segment_vectors(name: str, n_docs: int) -> Segments:
    """The embedding run's clause vectors, from its segment shards in the cached deployment."""
    with sqlite3.connect(CACHE / name / "data" / "prisma.db") as db:
        (result,) = db.execute("SELECT result FROM embedding_runs ORDER BY id LIMIT 1").fetchone()
    parts: dict[str, list[np.ndarray]] = {k: [] for k in SEGMENT_ARRAYS}
    for info in json.loads(result)["segments"]:
        with np.load(Path(info["uri"].removeprefix("file://"))) as z:
            for k in SEGMENT_ARRAYS:
                parts[k].append(z[k])
    seg = Segments(*(np.concatenate(parts[k]) for k in SEGMENT_ARRAYS))
    seg = seg._replace(vectors=np.ascontiguousarray(seg.vectors, dtype=np.float32), position=seg.position.astype(np.int64))
    assert np.all(np.diff(seg.position) >= 0) and seg.position[-1] == n_docs - 1
    return seg


def subset(seg: Segments, keep: np.ndarray) -> Segments:
    return Segments(*(a[keep] for a in seg[:4]))  # the clauses alone, as this study measured them


class Language:
    """One language's cached run, split, draws and the references on them."""

    def __init__(self, lang: str) -> None:
        self.lang, self.name = lang, f"e3c-{lang}"
        self.ds = prepare(self.name)
        self.n = len(self.ds.texts)
        self.sentences = int((self.ds.y >= 0).sum())
        assert np.all(self.ds.y[:self.sentences] >= 0) and np.all(self.ds.y[self.sentences:] < 0)
        self.seg = segment_vectors(self.name, self.n)
        self.x = np.ascontiguousarray(self.ds.dense, dtype=np.float32)
        self.base = SaeConfig(device="cpu").validate_for_dim(self.x.shape[1]).resolved(True)
        self.train_all, self.hold = holdout_split(self.n, self.base.holdout_fraction, 0)
        self.train, self.test = group_split(self.ds)
        self.draws = {"100": [draw(self.train, self.ds.y, LABELS, d) for d in range(DRAWS)], "all": [self.train]}
        self.y_test = self.ds.y[self.test]

    def held_out(self) -> dict[str, np.ndarray]:
        """The fixed held-out vectors: clauses then documents (the default's kind), and apart."""
        h = self.hold
        in_hold = np.isin(self.seg.position, h)
        sent_docs, case_docs = h[h < self.sentences], h[h >= self.sentences]
        both = lambda docs: np.concatenate([self.seg.vectors[np.isin(self.seg.position, docs)], self.x[docs]])  # noqa: E731
        return {"segments_and_documents": both(h), "segments": self.seg.vectors[in_hold], "documents": self.x[h],
                "sentences": both(sent_docs), "cases": both(case_docs)}

    def scores(self, codes: sp.csr_matrix) -> dict[str, list[float]]:
        """The product's readout on these sentence codes: F1 on the test sentences per draw."""
        out: dict[str, list[float]] = {}
        for n, draws in self.draws.items():
            for d, rows in enumerate(draws):
                fitted = readout_fit(codes[rows], self.ds.y[rows], d)
                pred = (readout_p(fitted, codes[self.test]) >= 0.5).astype(np.int64)
                out.setdefault(n, []).append(round(f1_of(self.y_test, pred), 4))
        return out

    def references(self) -> dict:
        ds, out = self.ds, {"tfidf_lr": {}, "dense_lr": {}}
        test_texts = [ds.texts[i] for i in self.test]
        for n, draws in self.draws.items():
            for d, rows in enumerate(draws):
                words = _fit_tfidf([ds.texts[i] for i in rows], ds.y[rows], d)
                pred = (np.zeros(len(self.test), np.int64) if words is None
                        else words[1].predict(words[0].transform(test_texts)).astype(np.int64))
                out["tfidf_lr"].setdefault(n, []).append(round(f1_of(self.y_test, pred), 4))
                pred = dense_lr(self.x[rows], ds.y[rows], d).predict(self.x[self.test]).astype(np.int64)
                out["dense_lr"].setdefault(n, []).append(round(f1_of(self.y_test, pred), 4))
        out["probe_on_product_run_codes"] = self.scores(ds.codes[:self.sentences].tocsr())
        return {m: summary(v) for m, v in out.items()}

    def sae(self, cfg: SaeConfig, n_docs: int) -> dict:
        """Train on the first n_docs documents' training rows; FVU on the fixed hold-out; the readout's F1."""
        rows = self.train_all[self.train_all < n_docs]
        torch.manual_seed(cfg.seed)
        x_train, _ = training_vectors(self.x, self.seg, cfg.train_on, rows, self.hold[:0])
        t0 = time.perf_counter()
        trainer = SaeTrainer(torch.from_numpy(np.ascontiguousarray(x_train)), cfg, torch.device("cpu"))
        for _ in range(trainer.total_steps):
            trainer.train_step()
        seconds = time.perf_counter() - t0
        pooled = pooled_codes(trainer.sae, subset(self.seg, self.seg.position < n_docs), n_docs)
        codes = pooled.documents.tocsr()
        dead = float(np.mean(np.diff(codes.tocsc().indptr) == 0))
        fvu = {k: round(holdout_metrics(trainer.sae, v, dead).fvu, 4) for k, v in self.held_out().items()}
        f1 = self.scores(codes[:self.sentences])
        return {"documents": n_docs, "train_documents": len(rows), "train_vectors": len(x_train),
                "characters": int(sum(len(t) for t in self.ds.texts[:n_docs])), "steps": trainer.total_steps,
                "seconds_training": round(seconds, 1), "dead_fraction": round(dead, 4),
                "fvu_heldout": fvu["segments_and_documents"], "fvu_heldout_by": fvu, **summary(f1)}


def summary(f1: dict[str, list[float]]) -> dict:
    return {"f1_at": {k: round(float(np.mean(v)), 4) for k, v in f1.items()},
            "sd": {k: round(float(np.std(v)), 4) for k, v in f1.items()}, "per_draw": f1}


def paired(row: dict, ref: dict) -> dict:
    """Difference from ref, draw by draw at 100 labels: mean, sd and the draws it wins."""
    a, b = np.array(row["per_draw"]["100"]), np.array(ref["per_draw"]["100"])
    diff = a - b
    return {"f1_100_minus_ref": round(float(diff.mean()), 4), "sd_of_difference": round(float(diff.std()), 4),
            "draws_better": int((diff > 0).sum()), "draws_worse": int((diff < 0).sum()),
            "f1_all_minus_ref": round(row["f1_at"]["all"] - ref["f1_at"]["all"], 4)}


def command() -> str:
    return " ".join(["nice -n 10 .venv/bin/python bench/studies/sae_corpus.py",
                     *(f"'{a}'" if " " in a else a for a in sys.argv[1:])])


def save(report: dict, out: Path = OUT) -> None:
    report.update({
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"torch_threads": torch.get_num_threads()},
        "command": command()})
    if report["command"] not in report.setdefault("commands", []):  # every run that wrote into this file, in order
        report["commands"].append(report["command"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


def over_seeds(variants: dict, field: str, values: tuple, seeds: tuple) -> dict | None:
    """Two values of one setting, each trained with every SAE seed (`<field>=<value> seed<s>`): their means, and the
    second minus the first seed by seed (paired by SAE seed and by draw); None until every run is there."""
    runs = {v: [variants.get(f"{field}={v} seed{s}") for s in seeds] for v in values}
    if any(r is None for rs in runs.values() for r in rs):
        return None
    out: dict = {str(v): {
        "sae_seeds": len(seeds), **{f"f1_{k}": round(float(np.mean([r["f1_at"][k] for r in rs])), 4) for k in ("100", "all")},
        **{f"f1_{k}_sd_over_seeds": round(float(np.std([r["f1_at"][k] for r in rs])), 4) for k in ("100", "all")},
        "fvu_heldout": round(float(np.mean([r["fvu_heldout"] for r in rs])), 4),
        "seconds_training": round(float(np.mean([r["seconds_training"] for r in rs])), 1),
        "steps": rs[0]["steps"]} for v, rs in runs.items()}
    first, second = values
    out[f"{second}_minus_{first}_per_seed"] = {
        k: [round(a["f1_at"][k] - b["f1_at"][k], 4) for a, b in zip(runs[second], runs[first])] for k in ("100", "all")}
    out[f"{second}_minus_{first}_fvu_per_seed"] = [round(a["fvu_heldout"] - b["fvu_heldout"], 4)
                                                   for a, b in zip(runs[second], runs[first])]
    return out


def run_language(lang: str, only: set[str] | None, report: dict, out_path: Path = OUT) -> None:
    t0 = time.perf_counter()
    L = Language(lang)
    out = report.setdefault("languages", {}).setdefault(lang, {})
    out.update({"sentences": L.sentences, "sentence_positives": int(L.ds.y[:L.sentences].sum()),
                "cases_cached": L.n - L.sentences,
                "characters_sentences": int(sum(len(t) for t in L.ds.texts[:L.sentences])),
                "characters_cases": int(sum(len(t) for t in L.ds.texts[L.sentences:])),
                "segments": len(L.seg.position), "heldout_documents": len(L.hold),
                "train_sentences": len(L.train), "test_sentences": len(L.test), "test_positives": int(L.y_test.sum()),
                "config_default": L.base.model_dump(include={"expansion_factor", "k", "epochs", "max_steps", "batch_size",
                                                             "lr_warmup_steps", "train_on", "document_codes"}),
                "product_run_fvu_heldout": L.ds.description["sae"]["fvu_heldout"]})
    if "references" not in out:
        out["references"] = L.references()
        print(f"{lang} references: " + ", ".join(f"{m} {v['f1_at']}" for m, v in out["references"].items()), flush=True)
        save(report, out_path)
    curve = out.setdefault("curve", {})
    if only is None or "curve" in only:
        done: set[int] = set()
        for cases in CASES:
            n = L.n if cases is None else L.sentences + min(cases, L.n - L.sentences)
            if n in done:
                continue
            done.add(n)
            key = str(n - L.sentences)
            if key not in curve:
                curve[key] = L.sae(L.base, n)
                save(report, out_path)
            r = curve[key]
            print(f"{lang} {key} cases: FVU {r['fvu_heldout']}, F1 {r['f1_at']} sd {r['sd']} ({r['seconds_training']} s)",
                  flush=True)
    default = curve.get(str(L.n - L.sentences))
    variants = out.setdefault("variants", {})
    seeded = out.setdefault("curve_seeds", {})
    for seed in CURVE_SEEDS:
        if only is None or f"curve_seed{seed}" not in only:
            continue
        points = seeded.setdefault(str(seed), {})
        for cases in CASES:
            n = L.n if cases is None else L.sentences + min(cases, L.n - L.sentences)
            key = str(n - L.sentences)
            if key in points:
                continue
            if n == L.n and f"default_seed{seed}" in variants:
                points[key] = {k: v for k, v in variants[f"default_seed{seed}"].items() if k != "paired_vs_default"}
            else:
                points[key] = L.sae(L.base.model_copy(update={"seed": seed}), n)
            save(report, out_path)
            r = points[key]
            print(f"{lang} seed {seed} {key} cases: FVU {r['fvu_heldout']}, F1 {r['f1_at']} ({r['seconds_training']} s)",
                  flush=True)
    if seeded:
        means = {}
        for key in curve:
            runs = [curve[key]] + [seeded[s][key] for s in seeded if key in seeded[s]]
            means[key] = {"sae_seeds": len(runs), "characters": curve[key]["characters"],
                          "fvu_heldout": round(float(np.mean([r["fvu_heldout"] for r in runs])), 4),
                          **{f"f1_{n}": round(float(np.mean([r["f1_at"][n] for r in runs])), 4) for n in ("100", "all")},
                          **{f"f1_{n}_sd_over_seeds": round(float(np.std([r["f1_at"][n] for r in runs])), 4)
                             for n in ("100", "all")}}
        out["curve_mean_over_sae_seeds"] = means
    for name, change in VARIANTS.items():
        if (only is not None and name not in only) or name in variants:
            continue
        r = L.sae(L.base.model_copy(update=change), L.n)
        r["change"] = change
        seed = change.get("seed", 0)
        same_seed = default if seed == 0 or name.startswith("default") else variants.get(f"default_seed{seed}")
        if same_seed is not None:
            r["paired_vs_default"] = paired(r, same_seed)  # the default with the same SAE seed (seed 0 for its seeds)
        variants[name] = r
        save(report, out_path)
        print(f"{lang} {name}: FVU {r['fvu_heldout']}, F1 {r['f1_at']} sd {r['sd']} ({r['seconds_training']} s) "
              f"{r.get('paired_vs_default')}", flush=True)
    if default is not None:
        for key, r in curve.items():
            r["paired_vs_all_cases"] = paired(r, default)
        out["paired_default_vs_references_at_100"] = {m: paired(default, out["references"][m])
                                                      for m in out["references"]}
        runs = [default] + [variants[f"default_seed{s}"] for s in CURVE_SEEDS if f"default_seed{s}" in variants]
        if len(runs) > 1:  # the default over its SAE seeds: the yardstick of a variant trained once (seed 0)
            mean = {k: round(float(np.mean([r["f1_at"][k] for r in runs])), 4) for k in ("100", "all")}
            out["default_over_sae_seeds"] = {
                "sae_seeds": len(runs), "f1_at": mean,
                "sd_over_seeds": {k: round(float(np.std([r["f1_at"][k] for r in runs])), 4) for k in ("100", "all")},
                "fvu_heldout": round(float(np.mean([r["fvu_heldout"] for r in runs])), 4),
                "fvu_sd_over_seeds": round(float(np.std([r["fvu_heldout"] for r in runs])), 4)}
            for r in variants.values():
                r["minus_default_seed_mean"] = {k: round(r["f1_at"][k] - mean[k], 4) for k in ("100", "all")}
        pairs = {}  # a variant over the SAE seeds it was trained with, against the default on the same seeds
        for name in REPEATED:
            seeds = {0: variants.get(name), 1: variants.get(f"{name} seed1")}
            base = {0: default, 1: variants.get("default_seed1")}
            got = [s for s in seeds if seeds[s] is not None and base[s] is not None]
            if len(got) < 2:
                continue
            pairs[name] = {"sae_seeds": got, **{f"f1_{k}": round(float(np.mean([seeds[s]["f1_at"][k] for s in got])), 4)
                                                for k in ("100", "all")},
                           **{f"default_f1_{k}": round(float(np.mean([base[s]["f1_at"][k] for s in got])), 4)
                              for k in ("100", "all")},
                           **{f"minus_default_{k}_per_seed": [round(seeds[s]["f1_at"][k] - base[s]["f1_at"][k], 4)
                                                               for s in got] for k in ("100", "all")},
                           "fvu_heldout": round(float(np.mean([seeds[s]["fvu_heldout"] for s in got])), 4),
                           "default_fvu_heldout": round(float(np.mean([base[s]["fvu_heldout"] for s in got])), 4)}
            for k in ("100", "all"):
                pairs[name][f"minus_default_{k}"] = round(pairs[name][f"f1_{k}"] - pairs[name][f"default_f1_{k}"], 4)
        if pairs:
            out["variants_over_sae_seeds"] = pairs
    for summary_key, field, values, seeds in (("batches", "batch_size", BATCHES, BATCH_SEEDS),
                                              ("precisions", "precision", PRECISIONS, PRECISION_SEEDS)):
        compared = over_seeds(variants, field, values, seeds)
        if compared is not None:
            out[summary_key] = compared
    out["seconds"] = round(out.get("seconds", 0) + time.perf_counter() - t0, 1)
    save(report, out_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", default="en")
    parser.add_argument("--only", default=None, help=f"comma-separated of curve, {', '.join(VARIANTS)}, "
                        + ", ".join(f"curve_seed{s}" for s in CURVE_SEEDS) + " (default: the curve and the variants)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)  # an SAE step on two shared cores: one thread is faster (bench/status.py --threads)
    report = json.loads(args.out.read_text()) if args.out.exists() else {}
    report["what"] = __doc__.split("\n\n")[0].replace("\n", " ")
    report["design"] = __doc__.split("\n\n")[1].replace("\n", " ")
    only = None if args.only is None else {s.strip() for s in args.only.split(",")}
    for lang in [s.strip() for s in args.languages.split(",") if s.strip()]:
        run_language(lang, only, report, args.out)


if __name__ == "__main__":
    main()
