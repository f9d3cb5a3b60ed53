"""Which notes to label next: the queue's policy (no database, no HTTP).

Before the probe can be trained (one class still missing), a batch is the seed's best hits and a share of its
near misses (the notes just below its cut: where a seed written in words misses hedges and synonyms). Once
both classes have labels, it is the current probe's most uncertain notes (P closest to 0.5), spread over the
feature space by a k-means++ pick among a pool of them (so ten notes of one template do not fill a batch).
Every batch also holds a fixed share of notes drawn uniformly at random from the unlabelled ones, marked as
such: they alone give an unbiased estimate of F1 (the others are chosen where the probe is unsure).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

REASONS = ("seed", "near_miss", "uncertain", "random")


@dataclass(frozen=True)
class QueuePolicy:
    random_share: float = 0.5
    """Share of each batch drawn uniformly at random (the unbiased estimate's notes). Half: on E3C English and
    Spanish the estimate's error at 200 labels fell from 0.15 to 0.04-0.10 against a fifth, and the probe's F1 moved
    by 0.01 at most (bench/results/labelling.json, policy_variants)."""
    near_miss_share: float = 0.3
    """Share of the seed's part of a batch taken from just below the seed's cut."""
    pool: int = 10
    """The uncertain part is picked among this many times as many of the most uncertain notes."""

    def describe(self) -> dict[str, Any]:
        return asdict(self)


class Pick(NamedTuple):
    position: int  # the note's position in its dataset
    reason: str  # one of REASONS


def split_batch(n: int, policy: QueuePolicy) -> tuple[int, int]:
    """(chosen, random) counts of a batch of n: the random share rounded, at least one when n >= 2."""
    random_n = round(n * policy.random_share)
    if n >= 2 and policy.random_share > 0:
        random_n = max(random_n, 1)
    return n - random_n, random_n


def _take(candidates: np.ndarray, open_: np.ndarray, taken: set[int], count: int) -> list[int]:
    out: list[int] = []
    for p in candidates.tolist():
        if len(out) >= count:
            break
        if open_[p] and p not in taken:
            out.append(p)
            taken.add(p)
    return out


def seed_picks(count: int, *, open_: np.ndarray, hits: np.ndarray, near: np.ndarray, policy: QueuePolicy,
               taken: set[int]) -> list[Pick]:
    """The seed's part: its best hits (positions, best first), then its near misses (best first)."""
    near_n = round(count * policy.near_miss_share) if len(near) else 0
    top = _take(hits, open_, taken, count - near_n)
    below = _take(near, open_, taken, count - len(top))
    return [Pick(p, "seed") for p in top] + [Pick(p, "near_miss") for p in below]


def kmeans_pp(rows: sp.csr_matrix, count: int, rng: np.random.Generator) -> list[int]:
    """k-means++ seeding over `rows` (unit-norm rows; row 0 first): `count` row indices, each next one drawn
    with probability proportional to its squared distance to the nearest already drawn."""
    n = rows.shape[0]
    if count >= n:
        return list(range(n))
    gram_row = lambda i: np.asarray((rows @ rows[i].T).todense()).ravel()
    squared = np.asarray(rows.multiply(rows).sum(1)).ravel()  # [n]
    chosen = [0]
    nearest = squared + squared[0] - 2 * gram_row(0)
    while len(chosen) < count:
        weights = np.clip(nearest, 0, None)
        weights[chosen] = 0
        total = weights.sum()
        nxt = int(rng.choice(n, p=weights / total)) if total > 1e-12 else int(
            rng.choice(np.setdiff1d(np.arange(n), chosen)))
        chosen.append(nxt)
        nearest = np.minimum(nearest, squared + squared[nxt] - 2 * gram_row(nxt))
    return chosen


def most_uncertain(candidates: np.ndarray, margin: np.ndarray, keep: int) -> np.ndarray:
    """The `keep` candidates (positions, ascending) with the smallest margin, smallest first; ties by position.
    Notes whose used features are all zero share one probability, so ties are many: an unstable selection
    (np.argpartition) broke them by the CPU's SIMD sort, and the queue then offered other notes on another CPU."""
    if keep < len(candidates):
        cut = np.partition(margin, keep - 1)[keep - 1]  # the keep-th smallest margin: one value on any CPU
        below = np.flatnonzero(margin < cut)
        inside = np.concatenate([below, np.flatnonzero(margin == cut)[: keep - len(below)]])
        candidates, margin = candidates[inside], margin[inside]
    return candidates[np.argsort(margin, kind="stable")]


def uncertain_picks(count: int, *, open_: np.ndarray, probability: np.ndarray, codes: sp.csr_matrix,
                    policy: QueuePolicy, rng: np.random.Generator, taken: set[int]) -> list[Pick]:
    """The probe's part: the `count * pool` open notes with P closest to 0.5, then `count` of them by k-means++
    over their row-normalised codes, starting from the most uncertain."""
    from gateway.domain.concepts.readout import normalise_rows

    candidates = np.flatnonzero(open_)
    candidates = candidates[~np.isin(candidates, list(taken))] if taken else candidates
    if count <= 0 or len(candidates) == 0:
        return []
    margin = np.abs(probability[candidates] - 0.5)
    pool = most_uncertain(candidates, margin, min(len(candidates), count * policy.pool))
    chosen = pool[kmeans_pp(normalise_rows(codes[pool]), min(count, len(pool)), rng)]
    taken.update(int(p) for p in chosen)
    return [Pick(int(p), "uncertain") for p in chosen]


def random_picks(count: int, *, open_: np.ndarray, rng: np.random.Generator, taken: set[int]) -> list[Pick]:
    candidates = np.flatnonzero(open_)
    if taken:
        candidates = candidates[~np.isin(candidates, list(taken))]
    chosen = rng.choice(candidates, size=min(count, len(candidates)), replace=False) if len(candidates) else []
    taken.update(int(p) for p in chosen)
    return [Pick(int(p), "random") for p in chosen]


def plan_batch(n: int, *, open_: np.ndarray, rng: np.random.Generator, policy: QueuePolicy = QueuePolicy(),
               probability: np.ndarray | None = None, codes: sp.csr_matrix | None = None,
               seed_hits: np.ndarray | None = None, seed_near: np.ndarray | None = None) -> list[Pick]:
    """Up to n notes among `open_` (bool [docs]: not labelled, not leased to someone else): the probe's part when
    `probability` ([docs], the current probe's P(positive)) is given, else the seed's (`seed_hits` and `seed_near`,
    positions best first; none: that part is random too); then the random share. Fewer when fewer are open."""
    chosen_n, random_n = split_batch(n, policy)
    taken: set[int] = set()
    # the random share is drawn first, from every open note: uniform over them (the probe's most uncertain note can
    # be drawn too), so that these notes alone estimate F1 without bias
    drawn = random_picks(random_n, open_=open_, rng=rng, taken=taken)
    if probability is not None and codes is not None:
        picks = uncertain_picks(chosen_n, open_=open_, probability=probability, codes=codes, policy=policy, rng=rng,
                                taken=taken)
    elif seed_hits is not None:
        picks = seed_picks(chosen_n, open_=open_, hits=seed_hits,
                           near=seed_near if seed_near is not None else np.empty(0, np.int64), policy=policy,
                           taken=taken)
    else:
        picks = []
    short = chosen_n - len(picks)  # the seed ran out, or no seed: uniform draws fill it (and are marked random)
    return picks + drawn + random_picks(short, open_=open_, rng=rng, taken=taken)
