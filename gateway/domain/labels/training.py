"""Retrain a concept's probe on its labels and say how good it already is: the estimate of F1 (out-of-fold
predictions; the queue's random share alone once it holds enough), the learning curve beside TF-IDF + LR on the
same labels, and the named features that carry the probe.

Reads happen in one session, the numerics outside any transaction, and the concept is written in another; one
retraining of a concept runs at a time (the lock is per process: the gateway that was asked)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp

from gateway.db import session_scope, utcnow
from gateway.domain.concepts.baselines import _fit_tfidf
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.readout import (
    Readout,
    assisted_f1,
    f1_interval,
    f1_of,
    fit_readout,
    left_out_decisions,
)
from gateway.domain.concepts.probe import positive
from gateway.domain.concepts.scope import probe_codes, segment_scope
from gateway.domain.concepts.texts import texts_at
from gateway.domain.labels import repo
from gateway.domain.labels.service import concept_or_404, labels_hash
from gateway.search.results import feature_labels

CURVE_BUDGETS = (10, 25, 50, 100, 200, 400, 800, 1600)
RETRAIN_EVERY = 10  # labels of both classes since the last training that start a retraining (a queue batch)
MIN_RANDOM_FOR_ESTIMATE = 20  # random-share labels before the estimate reads them alone
CARRIERS = 12
_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()


def concept_lock(concept_id: int) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(concept_id, threading.Lock())


def scope_words(probe: dict | None, labelling: dict | None) -> list[str] | None:
    """The concept's segment words: its probe's, or before the first training, those it was made with."""
    return (probe or {}).get("segment_words") or (labelling or {}).get("segment_words") or None


def scoped_rows(factory: Any, dataset_id: int, space: Any, words: list[str] | None,
                positions: np.ndarray) -> sp.csr_matrix:
    """[len(positions), n]: the rows a probe reads, the max over each note's clauses holding a word when it has
    words (a note without one reads as empty), else the note's own codes."""
    scope = segment_scope(space, words)
    if scope is not None:
        scope = scope.found(factory, dataset_id, positions)
    return probe_codes(factory, dataset_id, space, scope, positions)[positions]


_rows_cache: OrderedDict[tuple, sp.csr_matrix] = OrderedDict()
ROWS_CACHE = 4  # scoped rows of this many (run, words) kept: every note's max over its matching clauses
_rows_lock = threading.Lock()


def every_note_rows(factory: Any, space: Any, dataset_id: int, sae_run_id: int,
                    words: list[str] | None) -> sp.csr_matrix:
    """[docs, n]: what a probe with these words reads for every note (its clauses holding a word, or the note),
    kept for the next calls (finding the clauses reads every note's text)."""
    if not words:
        return space.codes.tocsr()
    key = (sae_run_id, tuple(words), space.n_docs)
    with _rows_lock:
        if key in _rows_cache:
            _rows_cache.move_to_end(key)
            return _rows_cache[key]
    rows = scoped_rows(factory, dataset_id, space, words, np.arange(space.n_docs))
    with _rows_lock:
        _rows_cache[key] = rows
        while len(_rows_cache) > ROWS_CACHE:
            _rows_cache.popitem(last=False)
    return rows


def estimate(y: np.ndarray, fitted: Readout, codes: sp.csr_matrix, random: np.ndarray,
             pool: sp.csr_matrix | None) -> tuple[dict | None, dict | None]:
    """(what the page shows, cross-validation over every label). Once the queue's random share holds
    MIN_RANDOM_FOR_ESTIMATE labels: F1 over the unlabelled notes (`pool`, the rows the probe reads), estimated
    from those random labels with the pool's own predictions (readout.assisted_f1), each random label read by a
    model that left it out; before, F1 of the out-of-fold predictions over every label (the queue picks notes
    where the probe is unsure, so that one leans low)."""
    if fitted.out_of_fold is None:
        return None, None
    cv = {**f1_interval(y, positive(fitted.out_of_fold)), "basis": "cross_validation"}
    rows = np.flatnonzero(random)
    if len(rows) < MIN_RANDOM_FOR_ESTIMATE or pool is None or pool.shape[0] == 0:
        return cv, cv
    left_out = left_out_decisions(codes, y, rows, readout=fitted.readout, c=fitted.probe.C)
    shown = assisted_f1(fitted.probability(pool), y[rows], 1.0 / (1.0 + np.exp(-left_out)))
    return {**shown, "basis": "random"}, cv


def curve_point(codes: sp.csr_matrix, texts: list[str], y: np.ndarray, *, seed: int = 0) -> dict[str, float | None]:
    """Cross-validated F1 of the features' readout and of TF-IDF + LR on the same labels (the same folds)."""
    from sklearn.model_selection import StratifiedKFold

    fitted = fit_readout(codes, y, seed=seed)
    features = round(f1_of(y, positive(fitted.out_of_fold)), 4) if fitted.out_of_fold is not None else None
    if fitted.folds < 2:
        return {"labels": len(y), "features": features, "tfidf": None}
    pred = np.zeros(len(y), np.int64)
    for train, test in StratifiedKFold(fitted.folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y):
        model = _fit_tfidf([texts[i] for i in train], y[train], seed)
        if model is not None:
            pred[test] = model[1].predict(model[0].transform([texts[i] for i in test]))
    return {"labels": len(y), "features": features, "tfidf": round(f1_of(y, pred), 4)}


def _read(app_state: Any, concept_id: int) -> dict[str, Any]:
    from gateway.domain.concepts.service import run_data

    with session_scope(app_state.factory) as session:
        concept = concept_or_404(session, concept_id)
        if concept.kind != "probe":
            raise ConceptInputError(f"concept {concept_id} is an expression: only a probe is trained on labels",
                                    field="concept_id", status_code=409)
        data = run_data(session, app_state.store, concept.sae_run_id, field="concept_id")
        rows = [r for r in repo.all_labels(session, concept_id=concept_id) if r[2] != "skip"]
        positions = np.array([r[1] for r in rows], dtype=np.int64)
        texts: dict[int, str] = {}
        for batch, found in texts_at(session, dataset_id=data.dataset.id, positions=np.unique(positions)):
            texts.update(zip(batch.tolist(), found))
        return {"data": data, "rows": rows, "positions": positions,
                "labelled_positions": np.fromiter(repo.labelled_positions(session, concept_id=concept_id), np.int64), "texts": [texts[int(p)] for p in positions],
                "probe": concept.probe, "labelling": concept.labelling or {},
                "counts": repo.label_counts(session, concept_id=concept_id)}


def _curve(previous: list[dict], codes: sp.csr_matrix, texts: list[str], y: np.ndarray,
           pairs: list[tuple[int, str]]) -> list[dict]:
    """Points at CURVE_BUDGETS up to the labels there are; a point whose first labels did not change is kept."""
    kept = {p["labels"]: p for p in previous}
    out = []
    for budget in CURVE_BUDGETS:
        if budget > len(y):
            break
        first = y[:budget]
        if min(int(first.sum()), int(budget - first.sum())) < 2:
            continue
        digest = labels_hash(pairs[:budget])
        point = kept.get(budget)
        if point is None or point.get("hash") != digest:
            point = {**curve_point(codes[:budget], texts[:budget], first), "hash": digest}
        out.append(point)
    return out


def retrain(app_state: Any, concept_id: int) -> dict[str, Any]:
    """Blocking: fit the readout on the concept's labels (skip excluded), store the probe, its estimate, curve and
    the labels it read (count and hash); returns the new `labelling`. Fewer than one label of a class: nothing is
    fitted, the counts are stored."""
    with concept_lock(concept_id):
        start = time.perf_counter()
        read = _read(app_state, concept_id)
        rows, data = read["rows"], read["data"]
        y = np.array([1 if r[2] == "positive" else 0 for r in rows], dtype=np.int64)
        random = np.array([r[3] == "random" for r in rows], dtype=bool)
        pairs = [(int(r[0]), r[2]) for r in rows]
        words = scope_words(read["probe"], read["labelling"])
        labelling: dict[str, Any] = {"version": int(read["labelling"].get("version", 0)) + 1,
                                     "trained_on": {"count": len(rows), "hash": labels_hash(pairs),
                                                    "at": utcnow().isoformat()},
                                     "counts": read["counts"], "estimate": None, "estimate_cv": None, "curve": [],
                                     "carriers": [], **({"segment_words": words} if words else {})}
        probe = None
        if y.sum() >= 1 and (len(y) - y.sum()) >= 1:
            codes = scoped_rows(app_state.factory, data.dataset.id, data.space, words, read["positions"])
            fitted = fit_readout(codes, y)
            coef = fitted.probe.coef[0]
            used = np.flatnonzero(coef)
            probe = {"weights": {str(int(i)): float(coef[i]) for i in used},
                     "intercept": float(fitted.probe.intercept[0]), "C": fitted.probe.C,
                     "cv_f1": round(fitted.probe.cv_score, 4) if fitted.out_of_fold is not None else None,
                     "threshold": 0.5, "converged": True, "readout": fitted.readout,
                     **({"segment_words": words} if words else {})}
            pool = None
            if int(random.sum()) >= MIN_RANDOM_FOR_ESTIMATE:  # every note nobody labelled, read as the probe reads
                every = every_note_rows(app_state.factory, data.space, data.dataset.id, data.run.id, words)
                unlabelled = np.ones(every.shape[0], dtype=bool)
                unlabelled[read["labelled_positions"]] = False
                pool = every[np.flatnonzero(unlabelled)]
            labelling["estimate"], labelling["estimate_cv"] = estimate(y, fitted, codes, random, pool)
            labelling["readout"], labelling["tried"] = fitted.readout, fitted.tried
            labelling["seconds_fit"] = round(time.perf_counter() - start, 4)
            labelling["curve"] = _curve(read["labelling"].get("curve", []), codes, read["texts"], y, pairs)
            top = used[np.argsort(-coef[used], kind="stable")]
            labelling["carriers_index"] = [int(i) for i in top[:CARRIERS] if coef[i] > 0]
        labelling["seconds"] = round(time.perf_counter() - start, 4)
        _write(app_state, concept_id, probe, labelling)
        return labelling


def retrain_due(concept: Any, counts: dict[str, int]) -> bool:
    """RETRAIN_EVERY labels of both classes since the last training (a probe only)."""
    trained = ((concept.labelling or {}).get("trained_on") or {}).get("count") or 0
    return (concept.kind == "probe" and counts["positive"] > 0 and counts["negative"] > 0
            and counts["positive"] + counts["negative"] - trained >= RETRAIN_EVERY)


def retrain_when_due(app_state: Any, concept_id: int) -> None:
    """Blocking, after an answer's response: wait for a retraining under way, then retrain if one is still due
    (skipping while one runs would leave the labels given meanwhile untrained until the next answer)."""
    with concept_lock(concept_id):
        pass
    with session_scope(app_state.factory) as session:
        concept = concept_or_404(session, concept_id)
        if not retrain_due(concept, repo.label_counts(session, concept_id=concept_id)):
            return
    retrain(app_state, concept_id)


def _write(app_state: Any, concept_id: int, probe: dict | None, labelling: dict[str, Any]) -> None:
    with session_scope(app_state.factory) as session:
        concept = concept_or_404(session, concept_id)
        names = feature_labels(session, sae_run_id=concept.sae_run_id, indices=labelling.get("carriers_index", []))
        weights = (probe or {}).get("weights", {})
        labelling["carriers"] = [{"index": i, "label": names[i][0], "weight": round(weights[str(i)], 4)}
                                 for i in labelling.pop("carriers_index", [])]
        concept.labelling = labelling
        if probe is not None:
            concept.probe = probe
            concept.features = sorted(int(i) for i in probe["weights"])
