"""Near misses of a feature, and the segments its name's threshold is calibrated on.

Near misses are what a name must not fit: the feature's weakest activations (its bottom quarter, never held
out as activating) and segments where one of its CO_FEATURES most co-firing features fires and it does not
(co-occurrence C_norm[f, j] = |f and j| / |f| over the corpus's codes; the interpreter holds no decoder, and
features that share segments are the ones whose names collide). Half of each kind is held out for the near-miss
score, never shown; the other half is the contrast phrases are chosen against. The weak activations leave the
term-statistics pool and the selection set, so the strongest segments are what a name is chosen from.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from services.interpreter.corpus import Corpus
from services.interpreter.evidence import EvidenceSet, feature_rng

CO_FEATURES = 5
HOLDOUT_EACH = 10
"""Held-out near misses of each kind (weak, co-firing)."""
SHOWN_EACH = 60
"""Near misses of each kind that phrases are contrasted with."""
CALIBRATION = 300
"""Activating segments outside the name's own evidence added to the held-out ones to calibrate its threshold."""
EXAMPLES = 5


class NearMisses:
    """Draws near misses for features of one corpus (its codes as rows, converted once)."""

    def __init__(self, corpus: Corpus, seed: int = 0) -> None:
        self.corpus, self.seed = corpus, seed
        self.rows = sp.csr_matrix(corpus.codes)  # [N, n]: the rows where a feature fires, sliced per feature

    def co_firing(self, feature: int, active: np.ndarray) -> list[int]:
        """The CO_FEATURES features that fire most often where `feature` does (index order on ties)."""
        counts = np.bincount(self.rows[active].indices, minlength=self.corpus.n_features)  # [n]
        counts[feature] = 0
        top = np.lexsort((np.arange(len(counts)), -counts))[:CO_FEATURES]
        return [int(j) for j in top if counts[j] > 0]

    def add(self, ev: EvidenceSet) -> None:
        """Fill ev's near misses and calibration set; the weak activations leave its pools."""
        rng = feature_rng(self.seed + 2, ev.feature)
        active, acts = self.corpus.column(ev.feature)
        act_of = dict(zip(active.tolist(), acts.tolist()))
        held = set(ev.holdout_activating)
        rest = np.array([p for p in active.tolist() if p not in held], dtype=np.int64)
        weak = np.empty(0, np.int64)
        if len(rest) >= 8:
            order = np.argsort([act_of[p] for p in rest.tolist()], kind="stable")  # weakest first
            weak = rest[order[: len(rest) // 4]]
        weak = rng.permutation(weak)
        shown_sets = {*ev.random_negatives, *ev.hard_negatives, *ev.pool_non_activating, *ev.selection_hard,
                      *ev.selection_random}
        others = np.concatenate([self.corpus.column(j)[0] for j in self.co_firing(ev.feature, active)] or
                                [np.empty(0, np.int64)])
        others = np.setdiff1d(others, active)
        others = rng.permutation(others[~np.isin(others, [*shown_sets, *ev.holdout_non_activating])])
        ev.holdout_near_misses = [*weak[:HOLDOUT_EACH].tolist(), *others[:HOLDOUT_EACH].tolist()]
        ev.near_misses = [*weak[HOLDOUT_EACH:HOLDOUT_EACH + SHOWN_EACH].tolist(),
                          *others[HOLDOUT_EACH:HOLDOUT_EACH + SHOWN_EACH].tolist()]
        out = set(weak.tolist())
        ev.pool_activating = [p for p in ev.pool_activating if p not in out]
        ev.selection_activating = [p for p in ev.selection_activating if p not in out]
        used = {*ev.pool_activating, *ev.selection_activating}
        spare = np.array([p for p in rest.tolist() if p not in used and p not in out], dtype=np.int64)
        spare = rng.permutation(spare)[:CALIBRATION]
        ev.calibration = [*ev.holdout_activating, *ev.holdout_near_misses[: len(weak[:HOLDOUT_EACH])], *spare.tolist()]
        ev.calibration_acts = [act_of[p] for p in ev.calibration]
        if set(ev.holdout_near_misses) & {*ev.pool_activating, *ev.selection_activating, *shown_sets, *ev.near_misses}:
            raise AssertionError(f"feature {ev.feature}: held-out near misses in the evidence")

    def examples(self, ev: EvidenceSet, chars: int = 160) -> list[str]:
        """The first EXAMPLES held-out near misses' texts, cut to `chars`."""
        return [" ".join(self.corpus.text(p).split())[:chars] for p in ev.holdout_near_misses[:EXAMPLES]]
