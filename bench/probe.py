"""Probe benchmark → bench/results/probe.json: how much a sparse feature probe gives up against
the dense embedding it is read from, on Medical Abstracts (2,888 abstracts, 5 classes).

One run, one fixed stratified split (75 % train / 25 % test, seed 0), three classifiers:
  - feature probe: Prisma's probe (`gateway.domain.concepts.probe.fit_probe`: L1 logistic
    regression, liblinear, one probe per class against the rest, C by 5-fold CV with the
    one-standard-error rule, classes balanced) on the document codes of a TopK SAE (k = 32,
    expansion 8, Prisma's trainer, 2,000 steps at lr 3e-3) trained on the *training split's*
    sentence vectors and document vectors only (~21k vectors: 2,166 document vectors alone are
    too few for 3,072 latents — the same finding as bench/sae.py); also with the best-CV C
    instead of the one-standard-error rule;
  - dense: L2 logistic regression on the 384-d embeddings, C by the same CV (macro-F1);
  - TF-IDF: L2 logistic regression on word 1-2-gram TF-IDF of the texts, C by the same CV.
All three see the same training documents and are scored on the same held-out ones.
Embeddings are Prisma's own (chunk-and-average, no token dropped) from the default encoder,
multilingual-e5-small with its 'passage: ' prompt (PRISMA_BENCH_MODEL=all-MiniLM-L6-v2 for the
earlier one), cached in /tmp under the model's name. Goals: the feature probe's macro-F1 within 0.03
of the dense one, and above the words' (TF-IDF). A result of another encoder already in the output
file is kept under `before.<model>` (its macro-F1s), so a change of encoder reports both.

`sensitivity` repeats the feature probe with SAEs trained for other numbers of steps: reported,
never used to choose (choosing on the held-out split would flatter the probe).

    nice -n 10 python bench/probe.py [--sensitivity 200,800,1500]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # sae_data: the sentence vectors bench/sae.py uses

from contracts.sae import SaeConfig  # noqa: E402
from sae_data import MODEL, TAG  # noqa: E402
from gateway.domain.concepts.probe import fit_probe, heldout_split, macro_f1  # noqa: E402
from services.sae.encoding import encode_all  # noqa: E402
from services.sae.trainer import SaeTrainer  # noqa: E402

DATA = ROOT.parent / "shared/data/medical-abstracts"
CACHE = Path(f"/tmp/prisma-bench/medabs-prisma-{TAG}.npy")
RESULTS = ROOT / "bench/results/probe.json"
CS = np.logspace(-3, 3, 13)


def read_abstracts() -> tuple[list[str], np.ndarray, dict[int, str]]:
    names = {int(r["condition_label"]): r["condition_name"]
             for r in csv.DictReader((DATA / "medical_tc_labels.csv").open(newline=""))}
    with (DATA / "medical_tc_test.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r["medical_abstract"] for r in rows], np.array([int(r["condition_label"]) for r in rows]), names


def embed(texts: list[str]) -> tuple[np.ndarray, float]:
    """[docs, 384] unit vectors from Prisma's encoder (cached); seconds spent (0 when cached)."""
    if CACHE.exists():
        return np.load(CACHE), 0.0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from services.embedder.encoder import embed_texts
    from services.embedder.models import load_model

    t0 = time.perf_counter()
    lm = load_model(MODEL, device=torch.device("cpu"))  # its default prompt (E5: 'passage: ')
    x = embed_texts(lm, texts, pooling="mean", normalize=True).vectors
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.save(CACHE, x)
    return x, time.perf_counter() - t0


SAE_STEPS, SAE_LR = 2000, 3e-3  # bench/sae.py's schedule for sentence + document vectors


def sentence_vectors(texts: list[str], rows: np.ndarray) -> np.ndarray:
    """[S, 384] sentence vectors of the documents `rows` (sentence-transformers on MODEL, cached)."""
    from sae_data import _cached, split_sentences

    sents, owner = [], []
    for i, text in enumerate(texts):
        pieces = split_sentences(text)
        sents += pieces
        owner += [i] * len(pieces)
    x = _cached(f"medabs-sentences-{TAG}", sents, 128)  # every sentence, embedded once
    return x[np.isin(np.asarray(owner), rows)]


def train_sae(x_train: np.ndarray, steps: int | None) -> tuple[SaeTrainer, float]:
    """Prisma's trainer, k = 32, expansion 8, `steps` (default SAE_STEPS) at SAE_LR."""
    cfg = SaeConfig(expansion_factor=8, k=32, max_steps=steps or SAE_STEPS, lr=SAE_LR, batch_size=256, seed=0,
                    device="cpu")
    trainer = SaeTrainer(torch.from_numpy(x_train), cfg, torch.device("cpu"))
    t0 = time.perf_counter()
    for _ in range(trainer.total_steps):
        trainer.train_step()
    return trainer, time.perf_counter() - t0


def feature_probe(x: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray, steps: int | None,
                  names: dict[int, str], sentences: np.ndarray) -> dict:
    """An SAE on the training split's sentence and document vectors, then Prisma's probe on the
    documents' codes (both C rules)."""
    x_sae = np.ascontiguousarray(np.concatenate([sentences, x[tr]]).astype(np.float32))
    trainer, sae_s = train_sae(x_sae, steps)
    codes = encode_all(trainer.sae, x)  # [docs, 3072] CSR, ≤ 32 non-zeros a row
    out = {"sae": {"n": trainer.sae.num_latents, "k": trainer.sae.k, "expansion_factor": 8,
                   "steps": trainer.total_steps, "batch_size": trainer.batch_size, "train_seconds": round(sae_s, 1),
                   "fvu_train_last": round(trainer.curve[-1]["fvu"], 4), "lr": SAE_LR,
                   "trained_on": f"training split only: {len(sentences):,} sentence + {len(tr):,} document vectors"}}
    for key, one_se in (("one_standard_error", True), ("best_cv_C", False)):
        t0 = time.perf_counter()
        probe = fit_probe(codes[tr], y[tr], seed=0, one_se=one_se)
        pred = probe.predict(codes[te])
        out[key] = {"macro_f1": round(macro_f1(y[te], pred), 4), "predictions": pred,
                    "features_used": int(len(probe.used_features)),
                    "features_per_class": {names[int(c)]: int(np.count_nonzero(probe.coef[i]))
                                           for i, c in enumerate(probe.classes)},
                    "mean_C": round(probe.C, 4), "converged": probe.converged,
                    "fit_seconds": round(time.perf_counter() - t0, 1)}
    return out


def dense_lr(x_train, y_train, x_test) -> tuple[np.ndarray, float]:  # noqa: ANN001
    """L2 logistic regression (multinomial, lbfgs), C by stratified 5-fold CV on macro-F1."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    model = LogisticRegressionCV(Cs=CS, l1_ratios=(0.0,), solver="lbfgs", class_weight="balanced", max_iter=3000,
                                 scoring="f1_macro", cv=StratifiedKFold(5, shuffle=True, random_state=0),
                                 use_legacy_attributes=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs at the largest C may stop at max_iter; reported by score
        model.fit(x_train, y_train)
    return model.predict(x_test), float(model.C_)


def macro_f1_difference(y: np.ndarray, a: np.ndarray, b: np.ndarray, resamples: int = 2000, seed: int = 0) -> dict:
    """Macro-F1(a) - macro-F1(b) on the same held-out documents, with a 95 % paired bootstrap
    percentile interval (each resample draws the documents with replacement, the same draw for both)."""
    classes = np.unique(y)
    yi, ai, bi = (np.searchsorted(classes, v) for v in (y, a, b))
    k, n = len(classes), len(y)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))  # [R, n]

    def macro(pred: np.ndarray) -> np.ndarray:  # [R]: macro-F1 of each resample
        rows = np.arange(resamples)[:, None] * k
        f1 = np.zeros((resamples, k))
        truth = np.bincount((rows + yi[draws]).ravel(), minlength=resamples * k).reshape(resamples, k)
        said = np.bincount((rows + pred[draws]).ravel(), minlength=resamples * k).reshape(resamples, k)
        hit = (pred == yi)[draws]
        tp = np.bincount((rows + yi[draws])[hit], minlength=resamples * k).reshape(resamples, k)
        np.divide(2 * tp, truth + said, out=f1, where=truth + said > 0)
        return f1.mean(1)

    diff = macro(ai) - macro(bi)
    low, high = np.quantile(diff, [0.025, 0.975])
    return {"difference": round(macro_f1(y, a) - macro_f1(y, b), 4), "low": round(float(low), 4),
            "high": round(float(high), 4), "level": 0.95, "resamples": resamples,
            "distinguishable": bool(low > 0 or high < 0)}


def run(sensitivity: list[int]) -> dict:
    texts, y, names = read_abstracts()
    x, embed_s = embed(texts)
    split = heldout_split(y, test_fraction=0.25, seed=0)
    tr, te = split.train, split.test
    out: dict = {"data": {"source": str(DATA / "medical_tc_test.csv"), "documents": len(texts), "classes": names,
                          "train": len(tr), "test": len(te), "split": "stratified, 25 % held out, seed 0",
                          "embedder": f"Prisma chunk-and-average, {MODEL}, mean pooling, unit norm",
                          "encoder": MODEL,
                          "embed_seconds": round(embed_s, 1) if embed_s else "cached"}}
    sentences = sentence_vectors(texts, tr)
    probe = feature_probe(x, y, tr, te, None, names, sentences)
    out["sae"] = probe.pop("sae")
    out["feature_probe"] = probe.pop("one_standard_error")
    out["feature_probe_best_cv_C"] = probe.pop("best_cv_C")
    probe_pred = out["feature_probe"].pop("predictions")
    out["feature_probe_best_cv_C"].pop("predictions")

    t0 = time.perf_counter()
    pred, c = dense_lr(x[tr], y[tr], x[te])
    out["dense"] = {"macro_f1": round(macro_f1(y[te], pred), 4), "C": round(c, 4), "features": x.shape[1],
                    "fit_seconds": round(time.perf_counter() - t0, 1)}
    dense_pred = pred

    from sklearn.feature_extraction.text import TfidfVectorizer

    t0 = time.perf_counter()
    tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    xt = tfidf.fit_transform([texts[i] for i in tr])
    pred, c = dense_lr(xt, y[tr], tfidf.transform([texts[i] for i in te]))
    out["tfidf"] = {"macro_f1": round(macro_f1(y[te], pred), 4), "C": round(c, 4), "features": xt.shape[1],
                    "fit_seconds": round(time.perf_counter() - t0, 1)}
    out["differences"] = {"feature_probe_minus_tfidf": macro_f1_difference(y[te], probe_pred, pred),
                          "feature_probe_minus_dense": macro_f1_difference(y[te], probe_pred, dense_pred)}

    gap = out["dense"]["macro_f1"] - out["feature_probe"]["macro_f1"]
    out["gap_dense_minus_probe"] = round(gap, 4)
    out["gap_probe_minus_tfidf"] = round(out["feature_probe"]["macro_f1"] - out["tfidf"]["macro_f1"], 4)
    out["goals"] = {"feature_probe_within_0.03_of_dense": gap <= 0.03,
                    "feature_probe_above_tfidf": out["gap_probe_minus_tfidf"] > 0}
    out["sensitivity"] = []
    for steps in sensitivity:  # reported, never used to choose
        more = feature_probe(x, y, tr, te, steps, names, sentences)
        out["sensitivity"].append({"sae_steps": steps, "fvu_train_last": more["sae"]["fvu_train_last"],
                                   "macro_f1": more["one_standard_error"]["macro_f1"],
                                   "macro_f1_best_cv_C": more["best_cv_C"]["macro_f1"],
                                   "features_used": more["one_standard_error"]["features_used"]})
    out["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    return out


def earlier_encoders(path: Path, model: str) -> dict:
    """The macro-F1s a result file holds for encoders other than `model` (its own and those it kept)."""
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    kept = {k: v for k, v in old.get("before", {}).items() if k != model}
    # files written before the encoder was recorded were MiniLM's (their embedder line says so)
    encoder = old.get("data", {}).get("encoder") or ("all-MiniLM-L6-v2" if "MiniLM" in old["data"]["embedder"] else None)
    if encoder and encoder != model:
        kept[encoder] = {k: old[k]["macro_f1"] for k in ("feature_probe", "feature_probe_best_cv_C", "dense", "tfidf")}
        kept[encoder]["sae_fvu_train_last"] = old["sae"]["fvu_train_last"]
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sensitivity", default="1000,4000",
                        help="comma-separated SAE step counts to repeat the feature probe with ('' for none)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = run([int(v) for v in args.sensitivity.split(",") if v.strip()])
    report["before"] = earlier_encoders(args.out, MODEL)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k]["macro_f1"] for k in ("feature_probe", "dense", "tfidf")} | report["goals"]))


if __name__ == "__main__":
    main()
