"""How well a label predicts its feature on held-out documents it was never shown.

- Embedding scorer: embed the label, take its cosine with each held-out document's vector;
  the score is the AUROC of that cosine, activating vs non-activating (no LLM; cheap).
- Detection scorer: a language model says, document by document, whether the label applies;
  the score is the balanced accuracy (mean of the recall on each side).

A control label (another feature's) is scored the same way: it says where chance lies for
this scorer on these documents. A label below the configured threshold is unreliable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
from scipy.stats import rankdata

from contracts.interpret import Interpretation, ScoringConfig
from services.interpreter.backends.base import Backend
from services.interpreter.calibration import MIN_ABOVE, MIN_PRECISION

#: texts → float32 [len(texts), d] unit-norm vectors, in the document vectors' space (or an
#: awaitable of them: the HTTP app embeds through an async client).
EmbedFn = Callable[[list[str]], "np.ndarray | Awaitable[np.ndarray]"]


def auroc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(score of a random positive > that of a random negative), ties counted half (Mann-Whitney U)."""
    if len(positive) == 0 or len(negative) == 0:
        raise ValueError("AUROC needs at least one positive and one negative")
    ranks = rankdata(np.concatenate([positive, negative]))
    u = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(u / (len(positive) * len(negative)))


def auroc_columns(positive: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """`auroc` of every column at once: positive [P, L], negative [Q, L] → [L]. The rank sums are scipy's
    `rankdata` (ties averaged) done in one sort of all columns: naming calls this thousands of times on a few
    hundred rows, where rankdata's own overhead was most of its cost; the ranks are whole and half numbers, so
    the sums are exact and the result is the same to the last bit."""
    if len(positive) == 0 or len(negative) == 0:
        raise ValueError("AUROC needs at least one positive and one negative")
    p, q = len(positive), len(negative)
    values = np.concatenate([positive, negative])  # [n, L]
    n = p + q
    order = np.argsort(values, axis=0, kind="stable")  # [n, L]
    ordered = np.take_along_axis(values, order, 0)
    new = np.ones(ordered.shape, bool)  # [n, L]: a value unlike the one before it starts a run of ties
    new[1:] = ordered[1:] != ordered[:-1]
    at = np.arange(n)[:, None]
    first = np.maximum.accumulate(np.where(new, at, 0), axis=0)  # each value's run: its first place ...
    ends = np.ones(ordered.shape, bool)
    ends[:-1] = new[1:]
    last = np.minimum.accumulate(np.where(ends, at, n)[::-1], axis=0)[::-1]  # ... and its last
    ranks = (first + last) / 2 + 1  # [n, L]: the run's average rank, 1-based
    return (np.where(order < p, ranks, 0.0).sum(0) - p * (p + 1) / 2) / (p * q)


def embedding_scores(label_vectors: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> list[float]:
    """AUROC per label. label_vectors [L, d]; positive [P, d], negative [Q, d] document vectors."""
    lv = label_vectors / np.maximum(np.linalg.norm(label_vectors, axis=1, keepdims=True), 1e-12)
    pos, neg = positive @ lv.T, negative @ lv.T  # [P, L], [Q, L]
    return [float(a) for a in auroc_columns(pos, neg)]


def balanced_accuracy(said_positive: Sequence[bool], said_negative: Sequence[bool]) -> float:
    """(true-positive rate + true-negative rate) / 2 of the answers on each side."""
    tpr = float(np.mean(said_positive)) if len(said_positive) else 0.0
    tnr = 1.0 - float(np.mean(said_negative)) if len(said_negative) else 0.0
    return (tpr + tnr) / 2


async def detection_score(backend: Backend, label: str, description: str | None,
                          positive: Sequence[str], negative: Sequence[str]) -> float:
    """Balanced accuracy of `backend` judging whether `label` applies to each held-out text."""
    answers = await backend.detect(label, description, [*positive, *negative])
    return balanced_accuracy(answers[: len(positive)], answers[len(positive):])


def finalise(interp: Interpretation, cfg: ScoringConfig) -> Interpretation:
    """Set `score` (detection when measured, else embedding; with near misses held out, the lower of that and
    the near-miss AUROC, so a name that fits its near misses as well scores low) and `reliable`: at or above
    its threshold, on at least `min_holdout_activating` held-out activating documents, and, where it was
    calibrated, with an activation threshold at which it holds (calibration.py)."""
    if interp.score_detection is not None:
        interp.score, threshold = interp.score_detection, cfg.detection_threshold
    elif interp.score_embedding is not None:
        interp.score, threshold = interp.score_embedding, cfg.embedding_threshold
        if interp.score_near_miss is not None:
            interp.score = min(interp.score, interp.score_near_miss)
    else:
        interp.score, interp.reliable = None, None
        return interp
    # A name calibrated on enough segments that reaches its precision at no activation does not hold;
    # with fewer than MIN_ABOVE segments to calibrate on (a small corpus) nothing is known either way,
    # so the score alone decides and `label:` reads any activation above zero.
    reasons = []
    if interp.score < threshold:
        near = interp.score_near_miss is not None and interp.score == interp.score_near_miss
        reasons.append(f"it tells its held-out segments from {'its near misses' if near else 'others'} at "
                       f"{interp.score:.2f}, below the {threshold:.2f} a name needs")
    if (n := len(interp.evidence.holdout_activating)) < cfg.min_holdout_activating:
        reasons.append(f"only {n} of its documents were left to test it on (a score needs {cfg.min_holdout_activating})")
    if interp.threshold is None and interp.calibrated_on >= MIN_ABOVE:
        reasons.append(f"at no activation do its words occur in {MIN_PRECISION * 100:.0f} % of the segments it fires on "
                       f"(of {interp.calibrated_on})")
    interp.reliable = not reasons
    interp.unreliable_reason = "; ".join(reasons) or None
    return interp


def best_index(interps: Sequence[Interpretation]) -> int | None:
    """Best-of-n: the highest score, a label that copies an excerpt only when every scored one does;
    unscored ones only if nothing is scored (then the first)."""
    if not interps:
        return None
    scored = [(not i.copies_input, i.score, -n) for n, i in enumerate(interps) if i.score is not None]
    return -max(scored)[2] if scored else 0
