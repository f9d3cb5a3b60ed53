"""Choosing labels on evidence documents (never the held-out ones): term lists composed greedily, names
before term lists within a tolerance, the next names kept as alternatives.

The embedding scorer ranks documents by cos(label, document); for one label the ranking is that of
label · document (documents are unit-norm, the label's norm is a constant), so the AUROC of a label
made of terms can be estimated from the terms' own vectors: Σ_t (v_t · document) for the sum of
their vectors. That sum only approximates the embedding of the joined terms (cosine ≈ 0.8 with
MiniLM), so the composed lists are candidates, embedded and compared exactly afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from contracts.interpret import Alternative, Interpretation, ScoringConfig
from services.interpreter.evidence import feature_rng
from services.interpreter.scoring import auroc_columns


def greedy_terms(pos: np.ndarray, neg: np.ndarray, max_terms: int = 4) -> list[list[int]]:
    """Term index lists, each the previous one plus the term that raises the evidence AUROC of the
    summed scores most (stops when none raises it). pos [P, T], neg [Q, T]: each term's cosine
    with the activating and non-activating evidence documents."""
    n_terms = pos.shape[1]
    chosen: list[int] = []
    out: list[list[int]] = []
    cur_p, cur_n = np.zeros(len(pos)), np.zeros(len(neg))
    last = -1.0
    for _ in range(min(max_terms, n_terms)):
        rest = [t for t in range(n_terms) if t not in chosen]
        scores = auroc_columns(cur_p[:, None] + pos[:, rest], cur_n[:, None] + neg[:, rest])  # [len(rest)]
        best = int(np.argmax(scores))
        if scores[best] <= last:
            break
        last = float(scores[best])
        chosen.append(rest[best])
        cur_p, cur_n = cur_p + pos[:, rest[best]], cur_n + neg[:, rest[best]]
        out.append(list(chosen))
    return out


def names_first(interps: list[Interpretation], tolerance: float) -> list[Interpretation]:
    """By evidence score, best first (stable: among equals the back-end's earlier, plainer one), copies
    of an excerpt after every other label, except that each back-end's best name (a label that is not a
    term list nor a copy) within `tolerance` of its best score goes first: a name reads better, and such
    differences are within the evidence's noise."""
    ranked = sorted(interps, key=lambda i: (i.copies_input, -(i.score_evidence or 0.0)))
    top: dict[str, float] = {}
    for i in ranked:
        top.setdefault(i.backend, i.score_evidence or 0.0)
    names: dict[str, Interpretation] = {}
    for i in ranked:
        if ", " not in i.label and not i.copies_input and (i.score_evidence or 0.0) >= top[i.backend] - tolerance:
            names.setdefault(i.backend, i)
    return [*names.values(), *(i for i in ranked if all(i is not n for n in names.values()))]


ALTERNATIVES = 3
"""Next phrases kept with a name, scored and calibrated: what it shows where another feature holds its name better."""


def with_alternatives(ranked: list[Interpretation], keep: int) -> list[Interpretation]:
    """The first `keep` of each back-end, each kept name carrying the back-end's next names (not term lists
    nor copies) as alternatives, best first."""
    kept = first_per_backend(ranked, keep)
    for interp in kept:
        others = [i.label for i in ranked if i.backend == interp.backend and all(i is not k for k in kept)
                  and ", " not in i.label and not i.copies_input]
        interp.alternatives = [Alternative(label=lab) for lab in dict.fromkeys(others)][:ALTERNATIVES]
    return kept


def lower(a: float | None, b: float | None) -> float | None:
    """The lower of two scores, either missing: the other."""
    return b if a is None else a if b is None else min(a, b)


def alternative_reliable(alt: Alternative, interp: Interpretation, cfg: ScoringConfig) -> bool | None:
    if alt.score is None:
        return None
    return (alt.score >= cfg.embedding_threshold and alt.threshold is not None
            and len(interp.evidence.holdout_activating) >= cfg.min_holdout_activating)


def first_per_backend(interps: list[Interpretation], keep: int) -> list[Interpretation]:
    """The first `keep` interpretations of each back-end, in the given order."""
    count: dict[str, int] = {}
    out = []
    for interp in interps:
        count[interp.backend] = count.get(interp.backend, 0) + 1
        if count[interp.backend] <= keep:
            out.append(interp)
    return out


def choose_controls(pending: Sequence[Any], pool: Sequence[str], seed: int) -> None:
    """Each feature's control (`p.control` of each Namer `_Pending`): the first label of another feature of this
    batch or of `pool`, drawn by the feature's own generator (evidence.feature_rng(seed, feature))."""
    labels = [(p.record.feature, p.record.interpretations[0].label) for p in pending if p.record.interpretations]
    candidates = [*labels, *((-1, lab) for lab in pool)]
    for p in pending:
        own = {i.label for i in p.record.interpretations}
        others = [lab for f, lab in candidates if f != p.record.feature and lab not in own]
        if others and p.record.interpretations:
            p.control = others[int(feature_rng(seed, p.record.feature).integers(len(others)))]
