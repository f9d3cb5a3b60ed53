"""A threshold per name: the lowest activation above which the name holds on at least MIN_PRECISION of segments.

For a feature's calibration segments (`near_misses.NearMisses.add`: its strongest segments, the keyword pool,
all of them, and a random sample of the rest of its activating segments, held-out ones included) with
activations a_i, h_i = the name holds on segment i (`phrases.name_holds`: its words occur there) and w_i the
segments of the corpus each stands for (1 for the pool's, the rest's count over the sample's for the others),

    precision(t) = sum(w_i h_i for a_i >= t) / sum(w_i for a_i >= t),
    threshold    = min { t in {a_i} : precision(t) >= MIN_PRECISION and #{a_i >= t} >= MIN_ABOVE },

so precision(t) estimates the share of the corpus's segments at or above t that the name holds on: what
label:"…" selects. Until 2026-11-29 the calibration segments left the pool out (the name is chosen from it) and
were unweighted, so the strongest activations were never measured: on the demo 171 of 518 reliable names with a
threshold held on under 70 % of the corpus's segments above it ("allattamento materno esclusivo", F180: 30 %,
its strongest segments being "Diario clinico:").

None when no t qualifies. precision(t) is not monotone in t, and the lowest qualifying t is the one that
keeps the most segments. Segments that do not activate the feature are below every t > 0 and do not change
the precision; they change the recall, which the threshold does not promise.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

MIN_PRECISION = 0.8
MIN_ABOVE = 5
"""Segments above a threshold at least: a precision of 1/1 says nothing."""
CURVE_POINTS = 12


class Curve(NamedTuple):
    thresholds: np.ndarray  # float64 [U]: distinct activations, descending
    precision: np.ndarray  # float64 [U]: precision of the segments at or above each
    above: np.ndarray  # int64 [U]: how many segments are at or above each


def precision_curve(acts: np.ndarray, holds: np.ndarray, weights: np.ndarray | None = None) -> Curve:
    """precision(t) at every distinct activation t, each segment counted `weights` times (once without), and the
    calibration segments at or above each (one sort, cumulative sums)."""
    acts = np.asarray(acts, dtype=np.float64)
    order = np.argsort(-acts, kind="stable")
    a, h = acts[order], np.asarray(holds, dtype=np.float64)[order]
    if not len(a):
        return Curve(np.empty(0), np.empty(0), np.empty(0, np.int64))
    w = np.ones(len(a)) if weights is None else np.asarray(weights, dtype=np.float64)[order]
    last = np.r_[a[1:] != a[:-1], True]  # the last of each run of equal activations: ties are all "at or above"
    n = np.arange(1, len(a) + 1)
    return Curve(a[last], np.cumsum(w * h)[last] / np.cumsum(w)[last], n[last].astype(np.int64))


def calibrated_threshold(acts: np.ndarray, holds: np.ndarray, min_precision: float = MIN_PRECISION,
                         min_above: int = MIN_ABOVE, weights: np.ndarray | None = None) -> float | None:
    """The lowest activation t with precision(t) >= min_precision on at least min_above segments; None if none."""
    return curve_threshold(precision_curve(acts, holds, weights), min_precision, min_above)


def curve_threshold(curve: Curve, min_precision: float = MIN_PRECISION, min_above: int = MIN_ABOVE) -> float | None:
    """`calibrated_threshold` read off a curve already computed."""
    ok = (curve.precision >= min_precision - 1e-12) & (curve.above >= min_above)
    return float(curve.thresholds[ok].min()) if ok.any() else None


def holds_on(curve: Curve, threshold: float | None, activations: np.ndarray) -> int | None:
    """Units of the whole corpus where the feature reaches `threshold` and the name holds, estimated: the
    precision at the threshold (estimated from the calibration segments) times the feature's activations at or
    above it (counted over all of them). What one meaning per name ranks the features sharing a name by: the
    feature whose label:"…" finds most of the units the name describes, at the promised precision. None
    without a threshold."""
    if threshold is None:
        return None
    at = np.flatnonzero(curve.thresholds == threshold)
    if not len(at):
        return None
    return int(round(float(curve.precision[at[0]]) * int(np.count_nonzero(np.asarray(activations) >= threshold))))


def even_ranks(n: int, m: int) -> np.ndarray:
    """The distinct int ranks of m points evenly spaced over 0 .. n-1, ascending: np.unique of
    np.linspace(0, n - 1, m).astype(int), without unique's sort (the points are ascending already)."""
    ranks = np.linspace(0, n - 1, m).astype(int)
    if len(ranks) < 2:
        return ranks
    keep = np.empty(len(ranks), bool)
    keep[0] = True
    np.not_equal(ranks[1:], ranks[:-1], out=keep[1:])
    return ranks[keep]


def curve_points(curve: Curve, points: int = CURVE_POINTS) -> list[tuple[float, float, int]]:
    """At most `points` (t, precision, above) of the curve, evenly spaced by rank, t descending, rounded."""
    if not len(curve.thresholds):
        return []
    pick = even_ranks(len(curve.thresholds), min(points, len(curve.thresholds)))
    return [(round(float(curve.thresholds[i]), 4), round(float(curve.precision[i]), 4), int(curve.above[i]))
            for i in pick]
