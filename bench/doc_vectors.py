"""Document vectors from segment vectors → bench/results/doc-vectors.json (issue #29).

An embedding run with segments runs every note through the model twice: once whole, once cut into
clauses. On the demo the notes are 70 % of the tokens embedded (512,455 against 216,554 in its
distinct clauses). `services.embedder.segments.mean_of_segments` makes a note's vector from its
clauses' vectors instead (their mean, each weighted by its content tokens), with no pass over the note: is
it as good a document vector? Measured against the model's own note vectors (chunk-and-average),
same model, fp32, same texts, on real text first. Outcome (2026-11-26): not built. It loses text
search on real abstracts (known-item MRR 0.936 → 0.841, topic AP 0.403 → 0.391) and on the demo
(topic AP 0.652 → 0.402), the demo's clause probe (mean of three SAE seeds 0.920 → 0.902), and it
saves nothing where clauses do not repeat (the abstracts: 917,800 distinct clause tokens against
798,909 in the abstracts). Built on 2026-11-28 as a run's opt-in `document_vectors: "segments"`
(the same function), for a corpus whose use is concepts on clauses rather than text search; the
demo and the default keep encoding the notes whole. Since then text search ranks a run with segments
by each document's vector and its best segment's (gateway/search/segment_rank.py, bench/text_search.py):
this file's text-search figures are of the document vectors alone.

  - Medical Abstracts (the 2,880 of its 2,888 abstracts with 3 sentences or more, 5 topics), each
    abstract without its first sentence (the title-like opening, used as the query):
      * known-item search: the opening sentence as a `query: ` finds its own abstract among all
        (MRR, recall@1, @10), by the document vector and by the best of its segments;
      * topic search: each topic's name as a query, average precision over all abstracts;
      * topic classification: dense L2 logistic regression (C by 5-fold CV, macro F1), 25 % held out;
  - NegEx and the demo (bench/status.py's sets, split and caches): dense LR F1, and
    probe_segments (the SAE trains on segment *and* document vectors, so its figure moves too),
    with TF-IDF + LR beside them (the words baseline: unchanged by construction); on the demo also
    topic search (each condition's first term as a query, relevant = the note mentions it);
  - the cosine of the two vectors (median, 5th percentile) and the tokens each way costs.

    PYTHONPATH=. python bench/doc_vectors.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import status  # noqa: E402
from sae_data import DATA, split_sentences  # noqa: E402
from status_data import LabelledSet, demo_set, negex_set  # noqa: E402

from gateway.domain.concepts.probe import heldout_split  # noqa: E402
from services.embedder.segments import mean_of_segments  # noqa: E402

OUT = ROOT / "bench/results/doc-vectors.json"
LABELS = DATA.with_name("medical_tc_labels.csv")


def _r(x: float) -> float:
    return round(float(x), 4)


def segment_docs(ds: LabelledSet) -> tuple[np.ndarray, np.ndarray, dict, Any]:
    """(model document vectors, documents from segments, costs, segments) for a set (status.py's caches)."""
    from services.embedder.encoder import tokenize_texts

    x_doc, doc_seconds = status.document_vectors(ds)
    seg, seg_seconds = status.segment_vectors(ds)
    lm = status._model()
    pieces = [ds.texts[d][a:b] for d, a, b in zip(seg.position.tolist(), seg.char_start.tolist(),
                                                    seg.char_end.tolist())]
    seg_tokens = tokenize_texts(lm, pieces).n_tokens + lm.n_special
    doc_tokens = tokenize_texts(lm, ds.texts).n_tokens  # chunks' specials left out: a lower bound
    x_seg = mean_of_segments(seg.position, seg.vectors, seg_tokens, len(ds.texts), lm.n_special)
    distinct = len(set(pieces))
    cos = np.sum(x_doc * x_seg, axis=1)
    return x_doc, x_seg, {
        "documents": len(ds.texts), "segments": len(pieces), "distinct_segments": distinct,
        "document_tokens": int(doc_tokens.sum()), "segment_tokens": int(seg_tokens.sum()),
        "distinct_segment_tokens": int(sum(dict(zip(pieces, seg_tokens.tolist())).values())),
        "cosine_median": _r(np.median(cos)), "cosine_p5": _r(np.percentile(cos, 5)),
        "seconds_cached": {"documents": round(doc_seconds, 1), "segments": round(seg_seconds, 1)},
    }, seg


def labelled(ds: LabelledSet, seeds: tuple[int, ...] = (0, 1, 2)) -> dict:
    """Dense LR and probe_segments (SAE seeds `seeds`) with each document vector; TF-IDF beside them."""
    x_doc, x_seg, costs, seg = segment_docs(ds)
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    out: dict[str, Any] = {"costs": costs, "tfidf_lr": status.run_tfidf(ds, split)["f1"]}
    for name, x in (("model", x_doc), ("from_segments", x_seg)):
        runs = [status.segment_probe(x, seg, ds, split, seed=seed) for seed in seeds]
        out[name] = {"dense_lr": status.run_dense(x, ds, split)["f1"], "sae_seeds": list(seeds),
                     "probe_segments": [m["f1"] for m in runs], "probe_cv_f1_train": [m["cv_f1_train"] for m in runs],
                     "probe_segments_mean": _r(np.mean([m["f1"] for m in runs]))}
    if ds.name == "demo":
        out["topic_search_ap"] = demo_topic_search(x_doc, x_seg)
    return out


def demo_topic_search(x_doc: np.ndarray, x_seg: np.ndarray) -> dict:
    """Each demo condition's first term as a `query: `; relevant = the note mentions that condition
    (any status: its labels). Generated text: it shows, it does not prove."""
    from gateway.demo.conditions import CONDITIONS
    from gateway.demo.corpus import generate_notes
    from services.embedder.encoder import embed_texts

    notes = list(generate_notes(2000, 0))
    lm = status._model().with_prompt("query")
    q = embed_texts(lm, [c.terms[0][0] for c in CONDITIONS], pooling="mean", normalize=True).vectors
    out: dict[str, dict] = {}
    for name, x in (("model", x_doc), ("from_segments", x_seg)):
        aps = {}
        for j, c in enumerate(CONDITIONS):
            relevant = np.array([any(lab.split(":")[0] == c.key for lab in n.labels) for n in notes], dtype=np.float64)
            if relevant.sum():
                aps[c.terms[0][0]] = _r(_ap(x @ q[j], relevant))
        out[name] = aps | {"mean": _r(np.mean(list(aps.values())))}
    return out


def _ap(scores: np.ndarray, relevant: np.ndarray) -> float:
    order = np.argsort(-scores, kind="stable")
    hits = relevant[order]
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float((precision * hits).sum() / max(hits.sum(), 1))


def abstracts() -> dict:
    import csv

    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import f1_score
    from sklearn.model_selection import StratifiedKFold

    from services.embedder.encoder import embed_texts

    with DATA.open(newline="", encoding="utf-8") as f:  # the abstracts and their topics, read once
        table = list(csv.DictReader(f))
    rows = [r["medical_abstract"] for r in table]
    y = np.array([int(r["condition_label"]) for r in table], dtype=np.int64)
    with LABELS.open(newline="", encoding="utf-8") as f:
        topics = {int(r["condition_label"]): r["condition_name"] for r in csv.DictReader(f)}
    openings, rests, keep = [], [], []
    for i, text in enumerate(rows):
        sentences = split_sentences(text)
        if len(sentences) >= 3:
            keep.append(i)
            openings.append(sentences[0])
            rests.append(" ".join(sentences[1:]))
    y = y[keep]
    ds = LabelledSet("abstracts-rest", rests, y, {})
    x_doc, x_seg, costs, seg = segment_docs(ds)
    lm = status._model().with_prompt("query")
    q = embed_texts(lm, openings, pooling="mean", normalize=True).vectors  # [N, d]
    t = embed_texts(lm, list(topics.values()), pooling="mean", normalize=True).vectors  # [5, d]
    out: dict[str, Any] = {"documents": len(rests), "dropped_shorter_than_3_sentences": len(rows) - len(rests),
                           "costs": costs}
    split = heldout_split(y, test_fraction=0.25, seed=0)
    starts = np.searchsorted(seg.position, np.arange(len(rests)))
    best_seg = np.maximum.reduceat(q @ seg.vectors.T, starts, axis=1)  # [N, N]: each document's best segment
    for name, scores_fn in (("model", lambda: q @ x_doc.T), ("from_segments", lambda: q @ x_seg.T),
                            ("best_segment", lambda: best_seg)):
        s = scores_fn()
        rank = (s > s[np.arange(len(q)), np.arange(len(q))][:, None]).sum(axis=1) + 1  # 1 = found first
        out.setdefault("known_item", {})[name] = {"mrr": _r(np.mean(1 / rank)), "recall_at_1": _r(np.mean(rank == 1)),
                                                  "recall_at_10": _r(np.mean(rank <= 10))}
    for name, x in (("model", x_doc), ("from_segments", x_seg)):
        aps = {topics[c]: _r(_ap(x @ t[j], (y == c).astype(np.float64))) for j, c in enumerate(topics)}
        out.setdefault("topic_search_ap", {})[name] = aps | {"mean": _r(np.mean(list(aps.values())))}
        model = LogisticRegressionCV(Cs=status.CS, scoring="f1_macro", max_iter=3000,
                                     cv=StratifiedKFold(5, shuffle=True, random_state=0))
        model.fit(x[split.train], y[split.train])
        out.setdefault("topic_dense_lr_macro_f1", {})[name] = _r(f1_score(y[split.test], model.predict(x[split.test]),
                                                                          average="macro"))
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    t0 = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "doc-vectors", "model": status.MODEL_NAME[0], "precision": "fp32",
        "method": "mean_of_segments: the mean of a document's clause vectors, each weighted by its "
                  "content tokens, unit norm; against the model's own chunk-and-average note vector",
        "abstracts": abstracts(),
    }
    torch.set_num_threads(1)  # status.py's SAE setting
    report["negex"] = labelled(negex_set(), seeds=(0,))
    report["demo"] = labelled(demo_set())
    write_report(report, t0, OUT)


def write_report(report: dict, t0: float, out: Path) -> None:
    """The report with its seconds since `t0` and the machine, into `out` and onto stdout."""
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
