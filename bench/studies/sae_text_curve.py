"""How much unlabelled text the SAE needs on real clinical cases: the product's default SAE (`SaeConfig()`, resolved
as a run with clause segments resolves it, trained by `services.sae.trainer.SaeTrainer` for its default schedule)
on the E3C layer-1 sentences plus the first 0, 100, 300, 1,000 and all cached layer-3 cases (bench/real_sets.py's
seeded order, the 1 M-character sample), each time on the embedding run's own vectors (the product's run, cached
under /tmp/prisma-bench/real). For each amount: held-out FVU (the pipeline's own split of that corpus), and the
product's probe readout (`fit_readout`) on the sentences' codes (max over their clauses, as the run pools them) at
100 labels (10 draws) and with all labels, on bench/real_text.py's split; TF-IDF + LR on the same draws beside it.

    nice -n 10 .venv/bin/python bench/studies/sae_text_curve.py --languages en
    nice -n 10 .venv/bin/python bench/studies/sae_text_curve.py --languages en,es,fr,eu --variants

With --variants, the SAE on every cached case with one setting changed at a time from the default (expansion 4 or
16, k 16 or 64, twice the epochs, trained on documents or segments alone), measured the same way (`variants`).

Writes bench/studies/results/sae-text-curve.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.real_sets import CACHE, group_split, prepare  # noqa: E402
from bench.real_text import draw  # noqa: E402
from contracts.sae import SaeConfig  # noqa: E402
from gateway.domain.concepts.baselines import _fit_tfidf  # noqa: E402
from gateway.domain.concepts.readout import f1_of, fit_readout  # noqa: E402
from services.sae.segments import ARRAYS as SEGMENT_ARRAYS, Segments, pooled_codes, training_vectors  # noqa: E402
from services.sae.trainer import SaeTrainer, holdout_metrics, holdout_split  # noqa: E402

OUT = ROOT / "bench/studies/results/sae-text-curve.json"
CASES = (0, 100, 300, 1000, None)  # None: every cached case
VARIANTS = {"expansion_factor=4": {"expansion_factor": 4}, "expansion_factor=16": {"expansion_factor": 16},
            "k=16": {"k": 16}, "k=64": {"k": 64}, "epochs x2": {"epochs": 100},
            "train_on=documents": {"train_on": "documents"}, "train_on=segments": {"train_on": "segments"}}
DRAWS, LABELS = 10, 100


def segment_vectors(name: str, n_docs: int) -> Segments:
    """The embedding run's clause vectors, read from its artifacts in the cached deployment."""
    data = CACHE / name / "data"
    with sqlite3.connect(data / "prisma.db") as db:
        (result,) = db.execute("SELECT result FROM embedding_runs ORDER BY id LIMIT 1").fetchone()
    shards = json.loads(result)["segments"]
    parts: dict[str, list[np.ndarray]] = {k: [] for k in SEGMENT_ARRAYS}
    for info in shards:
        path = Path(info["uri"].removeprefix("file://"))
        with np.load(io.BytesIO(path.read_bytes())) as z:
            for k in SEGMENT_ARRAYS:
                parts[k].append(z[k])
    seg = Segments(*(np.concatenate(parts[k]) for k in SEGMENT_ARRAYS))
    seg = seg._replace(vectors=seg.vectors.astype(np.float32), position=seg.position.astype(np.int64))
    assert seg.position[-1] == n_docs - 1
    return seg


def point(ds, seg: Segments, n_docs: int, cfg: SaeConfig, train, test) -> dict:  # noqa: ANN001
    """The SAE on the first n_docs documents (sentences first, then cases) and what its codes give."""
    x = ds.dense[:n_docs]
    keep = seg.position < n_docs
    sub = Segments(seg.vectors[keep], seg.position[keep], seg.char_start[keep], seg.char_end[keep])
    torch.manual_seed(cfg.seed)
    train_rows, hold_rows = holdout_split(n_docs, cfg.holdout_fraction, cfg.seed)
    x_train, x_hold = training_vectors(x, sub, cfg.train_on, train_rows, hold_rows)
    t0 = time.perf_counter()
    trainer = SaeTrainer(torch.from_numpy(np.ascontiguousarray(x_train)), cfg, torch.device("cpu"))
    for _ in range(trainer.total_steps):
        trainer.train_step()
    seconds = time.perf_counter() - t0
    codes = pooled_codes(trainer.sae, sub, n_docs).documents.tocsr()
    metrics = holdout_metrics(trainer.sae, np.ascontiguousarray(x_hold, dtype=np.float32), 0.0)
    f1 = {"100": [], "all": []}
    tfidf = {"100": [], "all": []}
    y_test = ds.y[test]
    for n, draws in (("100", [draw(train, ds.y, LABELS, d) for d in range(DRAWS)]), ("all", [train])):
        for d, rows in enumerate(draws):
            fitted = fit_readout(codes[rows], ds.y[rows], seed=d)
            f1[n].append(f1_of(y_test, (fitted.probability(codes[test]) >= 0.5).astype(np.int64)))
            words = _fit_tfidf([ds.texts[i] for i in rows], ds.y[rows], d)
            tfidf[n].append(f1_of(y_test, words[1].predict(words[0].transform([ds.texts[i] for i in test]))
                                  .astype(np.int64)))
    return {"documents": n_docs, "train_vectors": len(x_train), "steps": trainer.total_steps,
            "seconds": round(seconds, 1), "fvu_heldout": round(metrics.fvu, 4),
            "characters": int(sum(len(t) for t in ds.texts[:n_docs])),
            "probe_f1_at": {k: round(float(np.mean(v)), 4) for k, v in f1.items()},
            "probe_sd": {k: round(float(np.std(v)), 4) for k, v in f1.items()},
            "tfidf_lr_f1_at": {k: round(float(np.mean(v)), 4) for k, v in tfidf.items()}}


def language(lang: str) -> dict:
    name = f"e3c-{lang}"
    ds = prepare(name)
    sentences = int((ds.y >= 0).sum())
    assert np.all(ds.y[:sentences] >= 0) and np.all(ds.y[sentences:] < 0), "sentences first, then the cases"
    seg = segment_vectors(name, len(ds.texts))
    cfg = SaeConfig(device="cpu").validate_for_dim(ds.dense.shape[1]).resolved(True)
    train, test = group_split(ds)
    out = {"sentences": sentences, "cases_cached": len(ds.texts) - sentences,
           "config": cfg.model_dump(include={"expansion_factor", "k", "epochs", "max_steps", "batch_size", "train_on",
                                             "document_codes"}), "points": []}
    done: set[int] = set()
    for cases in CASES:
        n = len(ds.texts) if cases is None else sentences + min(cases, len(ds.texts) - sentences)
        if n in done:  # fewer cases cached than asked: that point is the last one
            continue
        done.add(n)
        row = {"cases": n - sentences, **point(ds, seg, n, cfg, train, test)}
        print(f"  {lang} {row['cases']} cases: FVU {row['fvu_heldout']}, probe {row['probe_f1_at']}, "
              f"tfidf {row['tfidf_lr_f1_at']} ({row['seconds']} s)", flush=True)
        out["points"].append(row)
    return out


def variants(lang: str) -> dict:
    """Every cached case, the default and one setting changed at a time."""
    ds = prepare(f"e3c-{lang}")
    seg = segment_vectors(f"e3c-{lang}", len(ds.texts))
    base = SaeConfig(device="cpu").validate_for_dim(ds.dense.shape[1]).resolved(True)
    train, test = group_split(ds)
    out = {}
    for name, change in {"default": {}, **VARIANTS}.items():
        cfg = base.model_copy(update=change)
        out[name] = point(ds, seg, len(ds.texts), cfg, train, test)
        print(f"  {lang} {name}: FVU {out[name]['fvu_heldout']}, probe {out[name]['probe_f1_at']} "
              f"({out[name]['seconds']} s)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--languages", default="en")
    parser.add_argument("--variants", action="store_true", help="the SAE's settings on every cached case")
    args = parser.parse_args()
    torch.set_num_threads(1)  # an SAE step on two shared cores: one thread is faster (bench/status.py --threads)
    report = json.loads(OUT.read_text()) if OUT.exists() else {}
    langs = report.get("languages", {})
    for lang in [s.strip() for s in args.languages.split(",") if s.strip()]:
        if args.variants:
            report.setdefault("variants", {})[lang] = variants(lang)
            report["variants_means"] = {
                name: {k: round(float(np.mean([v[name]["probe_f1_at"][k] for v in report["variants"].values()])), 4)
                       for k in ("100", "all")} | {"fvu_heldout": round(float(np.mean(
                           [v[name]["fvu_heldout"] for v in report["variants"].values()])), 4)}
                for name in ("default", *VARIANTS)}
        else:
            langs[lang] = language(lang)
        report.update({
            "what": __doc__.split("\n\n")[0].replace("\n", " "), "languages": langs,
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
            "date": time.strftime("%Y-%m-%d"),
            "machine": {"cores": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]},
            "command": " ".join(["python bench/studies/sae_text_curve.py", *sys.argv[1:]])})
        OUT.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
