"""Is a mention's status a direction of the encoder, and a feature of the SAE? → bench/studies/results/hedge-direction.json

Why the demo's expression from labels (#28: `SEGMENT(label:"bronchiolite" AND NOT label:"sospetta")`) stays far
below a probe on the same codes: a name can only lead to a feature that exists. Two questions on status.py's
sets, split, clause vectors (multilingual-e5-small, `passage: `, its cache) and SAE settings:

1. The encoder. A logistic regression trained on the distinct clauses that do NOT hold the topic (demo: clauses
   not naming bronchiolitis, labelled by a cue pattern; NegEx: clauses without the marked mention, labelled by
   NegEx's common triggers), scored on the distinct clauses that hold it (demo: the same cue pattern, and
   regex_cues's own cues; NegEx: the row's annotation, negated). A high AUROC means one direction of the
   vectors carries the status across topics: there is something for a feature to be.
2. The SAE. For each SAE variant (status.py's settings and some changes to them), the best AUROC any single
   feature's activation reaches on the same topic clauses, and the best F1 any single feature (active or not)
   reaches for the cue pattern over all clauses. A status feature a name could lead to would score near the
   direction of item 1.

Also the direction measured on what the default SAE leaves unexplained (x - its reconstruction): whether the
status is kept out of the dictionary or spread over its features.

3. Names as directions (demo): the best a name could do. For each cue word status.py's user types
   (status_expression.USER_WORDS), a direction learnt with the word itself as the label on the distinct clauses
   that do not name the topic (more supervision than an SAE feature has), thresholded as a name is
   (calibration.py: the lowest score above which the word occurs in >= 80 % of the clauses, at least 5), then
   the user's expression `SEGMENT(topic AND NOT (cue OR ...))` with the topic found by the word itself (the
   most precise topic there is), scored on status.py's held-out notes. Beside it: the same expression with each
   direction's threshold set so that it selects r times as many clauses as hold its word, r chosen by F1 on
   the training notes (what any threshold on these directions could give), and with the words themselves as
   the cues (the clause-scoped regex).

    nice -n 10 python bench/studies/hedge_direction.py            # after bench/status.py has cached the clause vectors
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import status  # noqa: E402  (puts the repository on the path)
from status_data import DEMO_CUES, demo_set, negex_set  # noqa: E402
from status_expression import USER_WORDS  # noqa: E402

from gateway.domain.concepts.probe import binary_metrics, heldout_split  # noqa: E402
from services.interpreter.calibration import MIN_ABOVE, MIN_PRECISION, calibrated_threshold  # noqa: E402
from services.sae.encoding import encode_all  # noqa: E402
from services.sae.segments import training_vectors  # noqa: E402

OUT = status.ROOT / "bench/studies/results/hedge-direction.json"
# the cue patterns: the status words of the demo's phrasing (suspected and excluded, every condition) and
# NegEx's commonest pre-triggers; what labels the clauses a direction is learnt from
CUES = {"demo": r"sospett|probabil|verosimil|possibil|dubbio|ipotesi|da confermare|\?|esclu|non segni|non evidenza|"
                r"non elementi|negativ|non compatibile",
        "negex": r"\b(no|not|denies|denied|without|negative|free of|absence of|absent|ruled out)\b"}
TOPIC = {"demo": r"bronchiolit", "negex": r"\["}
VARIANTS = {"status.py's SAE (expansion 8, k 32, 2,000 steps)": {},
            "expansion 32": {"expansion_factor": 32},
            "k 8": {"k": 8},
            "6,000 steps": {"max_steps": 6000},
            "expansion 32, 6,000 steps": {"expansion_factor": 32, "max_steps": 6000},
            "distinct training vectors only": {"distinct": True},
            "whitened inputs (PCA, eps = mean eigenvalue)": {"whiten": True}}


def direction_auroc(x: np.ndarray, train: np.ndarray, y_train: np.ndarray, test: np.ndarray,
                    y_test: np.ndarray) -> float:
    lr = LogisticRegression(C=10, max_iter=3000).fit(x[train], y_train[train])
    return round(float(roc_auc_score(y_test[test], lr.decision_function(x[test]))), 4)


def whitening(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    mu = x.mean(0)
    lam, v = np.linalg.eigh(np.cov((x - mu).T))
    w = v @ np.diag(1 / np.sqrt(lam + lam.mean())) @ v.T
    return mu, w, float(np.sqrt((((x - mu) @ w) ** 2).sum(1).mean()))


def best_single(codes, rows: np.ndarray, y_rows: np.ndarray, cue: np.ndarray) -> dict:
    """The best single feature: AUROC of its activation on `rows` for `y_rows`, and F1 of 'active' for `cue`."""
    codes = codes.tocsc()
    a = codes[rows].toarray()
    aurocs = [roc_auc_score(y_rows, a[:, j]) if np.count_nonzero(a[:, j]) >= 5 else 0.5 for j in range(a.shape[1])]
    active = (codes > 0).astype(np.float32)
    tp = np.asarray(active.T @ cue.astype(np.float32)).ravel()
    f1 = 2 * tp / (np.asarray(active.sum(0)).ravel() + cue.sum())
    j = int(np.argmax(aurocs))
    return {"status_auroc": round(float(aurocs[j]), 4), "feature": j,
            "active_on_topic_clauses": int(np.count_nonzero(a[:, j])),
            "cue_f1_over_all_clauses": round(float(f1.max()), 4)}


def names_as_directions(ds, split, seg, texts: list[str], topic: np.ndarray, distinct: np.ndarray) -> dict:
    """Item 3 of the docstring."""
    def scored(cue: np.ndarray, rows: np.ndarray) -> dict:
        doc = np.zeros(len(ds.texts), np.int64)
        doc[seg.position[topic & ~cue]] = 1
        m = binary_metrics(ds.y[rows], doc[rows])
        return {k: round(float(m[k]), 4) for k in ("precision", "recall", "f1")}

    words, directions, out = USER_WORDS["demo"][1], {}, {"words": list(USER_WORDS["demo"][1]), "by_word": {}}
    train = distinct & ~topic
    for w in words:
        has = np.array([w in t for t in texts])
        row: dict = {"clauses_with_word": int(has.sum()), "training_clauses_with_word": int((has & train).sum())}
        if (has & train).sum() >= MIN_ABOVE:
            lr = LogisticRegression(C=10, max_iter=3000).fit(seg.vectors[train], has[train])
            score = lr.decision_function(seg.vectors)
            t = calibrated_threshold(score, has, MIN_PRECISION, MIN_ABOVE)
            row["clauses_above_threshold"] = None if t is None else int((score >= t).sum())
            directions[w] = (score, t, int(has.sum()))
        out["by_word"][w] = row
    as_named = np.zeros(len(texts), bool)
    for score, t, _ in directions.values():
        if t is not None:
            as_named |= score >= t

    def at_ratio(r: float) -> np.ndarray:
        cue = np.zeros(len(texts), bool)
        for score, _, n in directions.values():
            cue |= score >= np.sort(score)[::-1][min(len(score), int(r * n)) - 1]
        return cue

    ratios = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0)
    best = max(ratios, key=lambda r: scored(at_ratio(r), split.train)["f1"])
    words_cue = np.array([any(w in t for w in words) for t in texts])
    out |= {"thresholded_as_names": scored(as_named, split.test),
            "best_ratio_on_training_notes": best, "at_best_ratio": scored(at_ratio(best), split.test),
            "the_words_themselves": scored(words_cue, split.test)}
    return out


def run_set(name: str) -> dict:
    ds = demo_set() if name == "demo" else negex_set()
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    x, _ = status.document_vectors(ds)
    seg, _ = status.segment_vectors(ds)
    texts = [ds.texts[p][a:b].casefold() for p, a, b in zip(seg.position, seg.char_start, seg.char_end)]
    topic = np.array([bool(re.search(TOPIC[name], t)) for t in texts])
    cue = np.array([bool(re.search(CUES[name], t)) for t in texts])
    _, first = np.unique(np.array(texts), return_index=True)
    distinct = np.zeros(len(texts), bool)
    distinct[first] = True
    if name == "demo":  # the status to read on the topic's clauses: the cue pattern, and regex_cues's own cues
        status_y = cue
        regex_cues = np.array([bool(DEMO_CUES.search(t)) for t in texts])
    else:  # the annotation of the row the clause belongs to: negated
        status_y = ds.y[seg.position] == 0
        regex_cues = None
    on = np.flatnonzero(topic)
    out: dict = {"clauses": len(texts), "distinct_clauses": int(distinct.sum()),
                 "topic_clauses": int(topic.sum()), "distinct_topic_clauses": int((topic & distinct).sum()),
                 "cue_pattern": CUES[name], "topic_pattern": TOPIC[name],
                 "cue_clauses_without_topic": int((cue & ~topic & distinct).sum())}
    train, test = distinct & ~topic, distinct & topic
    out["direction"] = {"status_auroc_on_topic_clauses": direction_auroc(seg.vectors, train, cue, test, status_y)}
    if regex_cues is not None:
        out["direction"]["regex_cues_auroc_on_topic_clauses"] = direction_auroc(seg.vectors, train, cue, test,
                                                                                regex_cues)
    if name == "demo":
        out["names_as_directions"] = names_as_directions(ds, split, seg, texts, topic, distinct)
        print(name, out["names_as_directions"], flush=True)
    x_tr, x_ho = training_vectors(x, seg, status.SEGMENTS_TRAIN_ON, split.train, split.test)
    out["sae"] = {}
    for label, change in VARIANTS.items():
        t0 = time.perf_counter()
        change = dict(change)
        tr, ho, vectors = x_tr, x_ho, seg.vectors
        if change.pop("distinct", False):
            tr = x_tr[np.sort(np.unique(np.round(x_tr, 5), axis=0, return_index=True)[1])]
        if change.pop("whiten", False):
            mu, w, scale = whitening(x_tr)
            tr, ho, vectors = (((v - mu) @ w / scale).astype(np.float32) for v in (x_tr, x_ho, seg.vectors))
        sae, info = status.train_sae(tr, ho, 0, **change)
        codes = encode_all(sae, np.ascontiguousarray(vectors, dtype=np.float32))
        row = {"fvu_heldout": info["fvu_heldout"], "latents": info["n"], **best_single(codes, on, status_y[on], cue),
               "seconds": round(time.perf_counter() - t0, 1)}
        if label.startswith("status.py"):
            recon = codes @ sae.W_dec.detach().numpy() + sae.b_dec.detach().numpy()
            resid = (seg.vectors - recon).astype(np.float32)
            out["direction"]["status_auroc_on_what_the_sae_leaves"] = direction_auroc(resid, train, cue, test, status_y)
        out["sae"][label] = row
        print(name, label, row, flush=True)
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    report = {"benchmark": __doc__.split("\n")[0], "model": status.MODEL_NAME[0],
              "sets": {name: run_set(name) for name in ("demo", "negex")},
              "machine": {"platform": platform.platform(), "torch_threads": torch.get_num_threads()}}
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    summary = {n: {"direction": s["direction"], "best_single": {k: v["status_auroc"] for k, v in s["sae"].items()}}
               for n, s in report["sets"].items()}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
