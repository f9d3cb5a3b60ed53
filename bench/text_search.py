"""Text search by documents, and by documents and their best segments → bench/results/text-search.json.

A run with segments ranks each document by the mean of two cosines to the query, its own vector's and
its best segment's (gateway/search/segment_rank.py); a run without, by its documents' vectors (the FAISS
index: exact inner product up to a million documents, the same ranking as `documents` here). Same
model (multilingual-e5-small, fp32, `passage: ` documents and `query: ` queries), same cached vectors
as bench/doc_vectors.py and bench/status.py; segments stored as a run stores them (float16), ranked by
the product's own `segment_rank.build` and `rank`.

  - Medical Abstracts (real; the 2,880 abstracts of 3 sentences or more, each without its opening
    sentence, which is the query): known-item search (the opening finds its own abstract: MRR,
    recall@1, @10) and topic search (each of the 5 topic names as a query: average precision);
  - the demo's 2,000 generated notes: each condition's first term as a query, relevant = the note
    mentions the condition (any status): average precision. Generated text: it shows, it does not prove.

Rankings: `documents` (the note's own vector), `best_segment` (the best clause alone),
`documents_and_segments` (what the product ranks by), and, for a run whose `document_vectors` is
`segments` (no pass over the whole note), `segment_mean` (that run's document vectors alone, what the
search read before) and `segment_mean_and_segments` (what the product ranks that run by now).

Speed (`scale`): one query at a time on synthetic unit vectors at the brief's scale, 200,000 documents
of 35 segments each (7,000,000 rows, the demo's clauses a note; 40 % of them 1,000 stock phrases, 30 %
20,000 topical ones) of which 500,000 are distinct (the `search_segments_max` default), one thread: the
ranker's p50 / p99 against the FAISS flat index of the 200,000 documents alone in the same run (query
embedding not included in either), for queries near one topical clause and for random ones (no segment
near: the worst case, every document scored).

    PYTHONPATH=. python bench/text_search.py            # everything
    PYTHONPATH=. python bench/text_search.py --scale    # the speed part alone, into the same file
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import doc_vectors as dv  # noqa: E402
import status  # noqa: E402
from sae_data import DATA, split_sentences  # noqa: E402
from status_data import LabelledSet, demo_set  # noqa: E402

from gateway.search import segment_rank  # noqa: E402
from services.embedder.encoder import embed_texts  # noqa: E402

OUT = ROOT / "bench/results/text-search.json"


def rankings(x_doc: np.ndarray, x_mean: np.ndarray, seg: Any, queries: np.ndarray) -> dict[str, np.ndarray]:
    """[Q, N] scores of every ranking for every query."""
    shard = {"vectors": seg.vectors.astype(np.float16), "position": seg.position, "char_start": seg.char_start,
             "char_end": seg.char_end}
    n = len(x_doc)
    out: dict[str, np.ndarray] = {}
    for name, docs in (("documents_and_segments", x_doc), ("segment_mean_and_segments", x_mean)):
        ranker = segment_rank.build(docs, [shard], max_distinct=10_000_000)
        scores = np.zeros((len(queries), n), dtype=np.float32)
        for i, q in enumerate(queries):
            r = segment_rank.rank(ranker, q, n)
            scores[i, r.positions] = r.scores
        out[name] = scores
    starts = np.searchsorted(seg.position, np.arange(n))
    out["documents"] = queries @ x_doc.T
    out["best_segment"] = np.maximum.reduceat(queries @ seg.vectors.astype(np.float16).astype(np.float32).T,
                                              starts, axis=1)
    out["segment_mean"] = queries @ x_mean.T
    return out


def _ordered(d: dict[str, Any]) -> dict[str, Any]:
    order = ("documents", "best_segment", "documents_and_segments", "segment_mean", "segment_mean_and_segments")
    return {k: d[k] for k in order}


def abstracts() -> dict:
    with DATA.open(newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    with dv.LABELS.open(newline="", encoding="utf-8") as f:
        topics = {int(r["condition_label"]): r["condition_name"] for r in csv.DictReader(f)}
    openings, rests, keep = [], [], []
    for i, r in enumerate(table):
        sentences = split_sentences(r["medical_abstract"])
        if len(sentences) >= 3:
            keep.append(i)
            openings.append(sentences[0])
            rests.append(" ".join(sentences[1:]))
    y = np.array([int(table[i]["condition_label"]) for i in keep], dtype=np.int64)
    x_doc, x_mean, costs, seg = dv.segment_docs(LabelledSet("abstracts-rest", rests, y, {}))
    lm = status._model().with_prompt("query")
    q = embed_texts(lm, openings, pooling="mean", normalize=True).vectors
    t = embed_texts(lm, list(topics.values()), pooling="mean", normalize=True).vectors
    known, topic = {}, {}
    for name, s in rankings(x_doc, x_mean, seg, q).items():
        rank = (s > s[np.arange(len(q)), np.arange(len(q))][:, None]).sum(axis=1) + 1
        known[name] = {"mrr": dv._r(np.mean(1 / rank)), "recall_at_1": dv._r(np.mean(rank == 1)),
                       "recall_at_10": dv._r(np.mean(rank <= 10))}
    for name, s in rankings(x_doc, x_mean, seg, t).items():
        aps = {topics[c]: dv._r(dv._ap(s[j], (y == c).astype(np.float64))) for j, c in enumerate(topics)}
        topic[name] = aps | {"mean": dv._r(np.mean(list(aps.values())))}
    return {"documents": len(rests), "segments": costs["segments"], "distinct_segments": costs["distinct_segments"],
            "known_item": _ordered(known), "topic_search_ap": _ordered(topic)}


def demo() -> dict:
    from gateway.demo.conditions import CONDITIONS
    from gateway.demo.corpus import generate_notes

    ds = demo_set()
    x_doc, x_mean, costs, seg = dv.segment_docs(ds)
    notes = list(generate_notes(2000, 0))
    names, relevant = [], []
    for c in CONDITIONS:
        rel = np.array([any(lab.split(":")[0] == c.key for lab in n.labels) for n in notes], dtype=np.float64)
        if rel.sum():
            names.append(c.terms[0][0])
            relevant.append(rel)
    q = embed_texts(status._model().with_prompt("query"), names, pooling="mean", normalize=True).vectors
    topic = {}
    for name, s in rankings(x_doc, x_mean, seg, q).items():
        aps = {w: dv._r(dv._ap(s[j], relevant[j])) for j, w in enumerate(names)}
        topic[name] = aps | {"mean": dv._r(np.mean(list(aps.values())))}
    return {"documents": len(ds.texts), "segments": costs["segments"], "distinct_segments": costs["distinct_segments"],
            "topic_search_ap": _ordered(topic)}


def scale(n_docs: int = 200_000, per_doc: int = 35, n_distinct: int = 500_000, d: int = 384,
          queries: int = 200) -> dict:
    import faiss
    from threadpoolctl import threadpool_limits

    from gateway.search import text_index

    rng = np.random.default_rng(0)

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    docs = unit(rng.standard_normal((n_docs, d), dtype=np.float32))
    distinct = unit(rng.standard_normal((n_distinct, d), dtype=np.float32))
    rows = n_docs * per_doc
    # as notes repeat: 40 % of the rows are 1,000 stock phrases, 30 % 20,000 topical ones (about 100 rows
    # each, like the clause that names a condition), 30 % any of the rest (a few rows each)
    stock, topical = 1000, 20_000
    tier = rng.random(rows)
    row_distinct = np.where(tier < 0.4, rng.integers(0, stock, rows),
                            np.where(tier < 0.7, rng.integers(stock, stock + topical, rows),
                                     rng.integers(stock + topical, n_distinct, rows))).astype(np.int32)
    ranker = segment_rank._ranker(docs, distinct, row_distinct, np.arange(n_docs, dtype=np.int64) * per_doc,
                                  np.zeros(rows, np.int32), np.ones(rows, np.int32))
    index = text_index.build_index(docs, "flat")
    faiss.omp_set_num_threads(1)
    # unrelated: random directions, no segment near any (the rule cannot settle: every document scored);
    # a clause: a topical segment's vector plus noise (cosine about 0.9 to it), as a query that names something
    near = distinct[rng.integers(stock, stock + topical, queries)]
    query_sets = {"unrelated": unit(rng.standard_normal((queries, d), dtype=np.float32)),
                  "a_clause": unit(near + 0.5 * unit(rng.standard_normal((queries, d), dtype=np.float32)))}
    out: dict[str, Any] = {"documents": n_docs, "segments": rows, "distinct_segments": n_distinct, "dim": d,
                           "rows": "40 % of 1,000 stock phrases, 30 % of 20,000 topical ones, 30 % of the rest",
                           "queries": queries, "threads": 1, "k": 20}
    with threadpool_limits(1):
        for qname, qs in query_sets.items():
            for name, fn in (("faiss_flat_documents", lambda q: text_index.search(index, q, 20)),
                             ("documents_and_segments", lambda q: segment_rank.rank(ranker, q, 20))):
                fn(qs[0])
                ms = []
                for q in qs:
                    t = time.perf_counter()
                    fn(q)
                    ms.append(1000 * (time.perf_counter() - t))
                out.setdefault(qname, {})[name] = {"p50_ms": round(float(np.percentile(ms, 50)), 2),
                                                   "p99_ms": round(float(np.percentile(ms, 99)), 2)}
            got = out[qname]
            got["ratio_p50"] = round(got["documents_and_segments"]["p50_ms"] / got["faiss_flat_documents"]["p50_ms"], 2)
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", action="store_true", help="the search at scale only (see above)")
    parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    if "--scale" in sys.argv:
        report = json.loads(OUT.read_text())
        report["scale"] = scale()
        OUT.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report["scale"], indent=1))
        return
    t0 = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "text-search", "model": status.MODEL_NAME[0], "precision": "fp32",
        "rankings": {
            "documents": "cosine of the document's own vector (what a run without segments ranks by)",
            "best_segment": "cosine of its best segment alone",
            "documents_and_segments": "mean of the two (gateway/search/segment_rank.py: what a run with segments "
                                      "ranks by)",
            "segment_mean": "cosine of the mean of its segments' vectors (a run with document_vectors: segments), "
                            "what such a run ranked by before",
            "segment_mean_and_segments": "mean of that and its best segment's (what such a run ranks by now)",
        },
        "abstracts": abstracts(),
        "demo": demo(),
        "scale": scale(),
    }
    dv.write_report(report, t0, OUT)


if __name__ == "__main__":
    main()
