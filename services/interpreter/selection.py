"""Choosing labels on evidence documents (never the held-out ones): term lists composed greedily.

The embedding scorer ranks documents by cos(label, document); for one label the ranking is that of
label · document (documents are unit-norm, the label's norm is a constant), so the AUROC of a label
made of terms can be estimated from the terms' own vectors: Σ_t (v_t · document) for the sum of
their vectors. That sum only approximates the embedding of the joined terms (cosine ≈ 0.8 with
MiniLM), so the composed lists are candidates, embedded and compared exactly afterwards.
"""

from __future__ import annotations

import numpy as np

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
