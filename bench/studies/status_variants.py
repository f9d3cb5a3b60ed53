"""Representations measured against `bench/status.py`'s figures and not built (issue #16) →
bench/studies/results/status-variants.json. Same sets, same split, same SAE settings and the same cached
vectors as status.py (run it first: it fills /tmp/prisma-bench).

  - clauses_in_context: late chunking. Each sentence goes through the model once (status.py's token
    states), and a clause's vector is the mean of its own tokens' states, so `bronchiolite,` in
    `Ipotesi diagnostica: bronchiolite, da confermare.` has seen its hedge. The clause probe
    (seeds 0-2), the anchored probe and the scoped expression as status.py computes them on
    clauses embedded alone;
  - mention_tokens: the mention's own tokens in context (NegEx: the bracketed words; demo: each
    `bronchiolit…` word), max over a document's mentions: dense LR, and the probe on the codes of an
    SAE trained on the training rows' clause, mention and document vectors (seeds 0-2);
  - token_expression: the token SAE of status.py's probe_tokens, codes max-pooled to sentences,
    features named on sentences by the keywords back-end, and status.py's user expression over
    those sentences; with the topic features' precision and recall at the sentence level.

    nice -n 10 python bench/studies/status_variants.py
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import status as S  # noqa: E402
from gateway.domain.concepts.probe import Split, heldout_split  # noqa: E402
from services.embedder.encoder import tokenize_texts  # noqa: E402
from services.sae.segments import Segments, pooled_codes  # noqa: E402
from status_data import LabelledSet, demo_set, negex_set  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "status-variants.json"
MENTIONS = {"demo": r"bronchiolit\w*", "negex": r"\[[^\]]*\]"}
BIG = 1 << 32  # (document, character) as one sortable key


def _f1(m: dict | None) -> dict | None:
    return None if m is None else {k: m[k] for k in ("f1", "precision", "recall")}


def token_positions(ds: LabelledSet, sent: Segments, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document [T], character start in the document [T]) of status.py's cached token states."""
    pieces = [ds.texts[d][a:b] for d, a, b in zip(sent.position.tolist(), sent.char_start.tolist(),
                                                   sent.char_end.tolist())]
    tok = tokenize_texts(S._model(), pieces)
    if not np.array_equal(np.bincount(owner, minlength=len(pieces)), np.diff(tok.starts)):
        raise RuntimeError("the cached token states do not match the sentences' tokens")
    starts = np.fromiter((o[0] for offs in tok.offsets for o in offs), dtype=np.int64, count=len(owner))
    return sent.position[owner], starts + sent.char_start[owner]


def mean_over_spans(x: np.ndarray, tdoc: np.ndarray, tstart: np.ndarray, doc: np.ndarray, start: np.ndarray,
                    end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm mean of the token states starting inside each span (spans sorted, not overlapping),
    and how many tokens each got."""
    which = np.searchsorted(doc * BIG + start, tdoc * BIG + tstart, side="right") - 1
    w = np.maximum(which, 0)
    inside = (which >= 0) & (doc[w] == tdoc) & (tstart < end[w])
    pool = sp.csr_matrix((np.ones(int(inside.sum()), np.float32), (which[inside], np.flatnonzero(inside))),
                         shape=(len(doc), len(x)))
    v = np.asarray(pool @ x)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-6)
    return v.astype(np.float32), np.asarray(pool.sum(axis=1)).ravel().astype(np.int64)


def clauses_in_context(ds: LabelledSet, split: Split, x_doc: np.ndarray, clause: Segments, x: np.ndarray,
                       tdoc: np.ndarray, tstart: np.ndarray) -> dict:
    v, counts = mean_over_spans(x, tdoc, tstart, clause.position, clause.char_start, clause.char_end)
    v[counts == 0] = clause.vectors[counts == 0]
    seg = Segments(v, clause.position, clause.char_start, clause.char_end)
    out: dict[str, Any] = {"stages": {}}
    pooled: list = []
    res: dict[str, Any] = {"probe_segments": _f1(S.segment_probe(x_doc, seg, ds, split, out, keep=pooled))}
    res["fvu_heldout"] = out["sae_segments"]["fvu_heldout"]
    res["cos_with_clause_alone_mean"] = round(float((v * clause.vectors).sum(1).mean()), 4)
    res["probe_segments_seeds_1_2"] = [S.segment_probe(x_doc, seg, ds, split, {"stages": {}}, seed=s)["f1"]
                                       for s in (1, 2)]
    _, res["probe_anchored"] = map(_f1, S.run_anchored(ds, split, seg, pooled[0], out))
    res["expression_scoped"] = _f1(S.run_expression(ds, split, seg, pooled[0], out))
    return res


def mention_tokens(ds: LabelledSet, split: Split, x_doc: np.ndarray, clause: Segments, x: np.ndarray,
                   tdoc: np.ndarray, tstart: np.ndarray) -> dict:
    pat = re.compile(MENTIONS[ds.name], re.IGNORECASE)
    spans = [(d, m.start(), m.end()) for d, t in enumerate(ds.texts) for m in pat.finditer(t)]
    mdoc, ms, me = (np.array(c, dtype=np.int64) for c in zip(*spans))
    v, _ = mean_over_spans(x, tdoc, tstart, mdoc, ms, me)
    dense = np.full((len(ds.texts), v.shape[1]), -np.inf, dtype=np.float32)
    np.maximum.at(dense, mdoc, v)
    dense[np.isinf(dense)] = 0
    res: dict[str, Any] = {"mentions": len(mdoc), "documents_with_one": int(len(np.unique(mdoc))),
                           "dense_lr": _f1(S.run_dense(dense, ds, split)), "probe": []}
    seg = Segments(v, mdoc, ms.astype(np.int32), me.astype(np.int32))
    in_train, m_train = np.isin(clause.position, split.train), np.isin(mdoc, split.train)
    x_train = np.concatenate([clause.vectors[in_train], v[m_train], x_doc[split.train]]).astype(np.float32)
    for seed in (0, 1, 2):
        sae, info = S.train_sae(x_train, v[~m_train], seed)
        res["probe"].append({"seed": seed, "fvu_heldout_mentions": info["fvu_heldout"],
                             **_f1(S.run_probe(pooled_codes(sae, seg, len(ds.texts)).documents, ds, split))})
    return res


def token_expression(ds: LabelledSet, split: Split, sent: Segments, x: np.ndarray, owner: np.ndarray) -> dict:
    info, seg_codes, docs = S.token_codes(x, owner, sent, split, len(ds.texts))
    seg_codes = seg_codes.tocsr()
    labels, naming = S.name_on_segments(ds, sent, seg_codes)
    topic, cues = S.USER_WORDS[ds.name]
    expression, chosen = S.user_expression(labels, topic, cues, whole_words=S.WHOLE_WORDS[ds.name])
    res: dict[str, Any] = {"fvu_heldout": info["fvu_heldout"], "naming": naming,
                           "expression_tokens": _f1(S.score_expression(ds, split, sent, seg_codes, docs, labels,
                                                                       expression)),
                           "topic_features": len(chosen["topic_features"]), "cue_features": len(chosen["cue_features"])}
    if topic:  # how precise, per sentence, is each feature a user finds under the topic's name?
        anchor = re.compile(S.ANCHORS[ds.name], re.IGNORECASE)
        names = np.array([bool(anchor.search(ds.texts[d][a:b])) for d, a, b in
                          zip(sent.position.tolist(), sent.char_start.tolist(), sent.char_end.tolist())])
        csc, rows = seg_codes.tocsc(), []
        for f in map(int, chosen["topic_features"]):
            col = csc[:, f].toarray().ravel()
            on, high = col > 0, col > 0.5 * col.max()
            rows.append({"feature": f, "label": labels[f], "sentences": int(on.sum()),
                         "precision": round(float(names[on].mean()), 3), "recall": round(float(on[names].mean()), 3),
                         "precision_above_half_max": round(float(names[high].mean()), 3),
                         "recall_above_half_max": round(float(high[names].mean()), 3)})
        res["topic_features_by_sentence"] = {"sentences": len(names), "naming_the_topic": int(names.sum()),
                                             "features": rows}
    return res


def run_set(ds: LabelledSet) -> dict:
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    x_doc, _ = S.document_vectors(ds)
    clause, _ = S.segment_vectors(ds)
    sent, _ = S.segment_vectors(ds, "sentence")
    x16, owner, _ = S.token_states(ds, sent)
    x = x16.astype(np.float32)
    tdoc, tstart = token_positions(ds, sent, owner)
    out = {"clauses_in_context": clauses_in_context(ds, split, x_doc, clause, x, tdoc, tstart),
           "mention_tokens": mention_tokens(ds, split, x_doc, clause, x, tdoc, tstart)}
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)
    out["token_expression"] = token_expression(ds, split, sent, x, owner)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--sets", default="demo,negex")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    report: dict[str, Any] = {}
    for name in args.sets.split(","):
        report[name] = run_set(demo_set() if name == "demo" else negex_set())
        print(name, json.dumps(report[name])[:2000], flush=True)
    report["command"] = " ".join(["python bench/studies/status_variants.py", *sys.argv[1:]])
    report["compare_with"] = "bench/results/status.json (same split, SAE settings and cached vectors)"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
