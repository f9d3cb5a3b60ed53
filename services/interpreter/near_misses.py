"""Near misses of a feature, and the segments its name's threshold is calibrated on.

Near misses are what a name must not fit: segments where one of its CO_FEATURES most co-firing features fires
and it does not (co-occurrence C_norm[f, j] = |f and j| / |f| over the corpus's codes; the interpreter holds no
decoder, and features that share segments are the ones whose names collide). Up to HOLDOUT are held out for the
near-miss score, never shown; the next SHOWN are the contrast phrases are chosen against.

The feature's weak activations are near misses of another kind: they enter the calibration set (every segment
of the keyword pool, its strongest, and a random sample of the rest of its activating segments, held-out ones
included, weak ones among them, each weighted by the segments it stands for), where the precision curve finds the
activation below which the name stops holding. They are not in the near-miss AUROC: a feature whose weak
activations mean what its strong ones do would score as chance there, and lose a name that holds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from services.interpreter.corpus import Corpus
from services.interpreter.evidence import EvidenceSet, feature_rng
from services.interpreter.rows import column_counts

CO_FEATURES = 5
HOLDOUT = 20
"""Held-out near misses the near-miss score is measured on."""
SHOWN = 120
"""Near misses phrases are contrasted with."""
CALIBRATION = 300
"""Activating segments outside the name's own evidence added to the held-out ones (and to the pool's, all of them)
to calibrate its threshold."""
EXAMPLES = 5


class NearMisses:
    """Draws near misses for features of one corpus (its codes as rows, converted once)."""

    def __init__(self, corpus: Corpus, seed: int = 0) -> None:
        self.corpus, self.seed = corpus, seed
        self.rows = sp.csr_matrix(corpus.codes)  # [N, n]: the rows where a feature fires, sliced per feature

    def co_firing(self, feature: int, active: np.ndarray) -> list[int]:
        """The CO_FEATURES features that fire most often where `feature` does (index order on ties)."""
        counts = column_counts(self.rows.indptr, self.rows.indices, active, self.corpus.n_features)  # [n]
        counts[feature] = 0
        fired = np.flatnonzero(counts)  # only the features that co-fire are sorted (a few hundred of thousands)
        return fired[np.lexsort((fired, -counts[fired]))][:CO_FEATURES].tolist()

    def add(self, ev: EvidenceSet) -> None:
        """Fill ev's near misses (segments of its co-firing features where it is silent: half held out, never
        shown) and its calibration set: the pool's segments, each itself (weight 1: the strongest, which a sample
        would miss and label:"…" selects first), then the held-out activating segments and a random sample of the
        other activating ones outside its evidence, the weak ones among them, each standing for its share of the
        activating segments outside the pool."""
        rng = feature_rng(self.seed + 2, ev.feature)
        active, acts = self.corpus.column(ev.feature)
        shown_sets = {*ev.random_negatives, *ev.hard_negatives, *ev.pool_non_activating, *ev.selection_hard,
                      *ev.selection_random, *ev.holdout_non_activating}
        silent = np.zeros(self.rows.shape[0], dtype=bool)  # [N]: where a co-firing feature fires and it does not
        for j in self.co_firing(ev.feature, active):
            silent[self.corpus.column(j)[0]] = True
        silent[active] = False
        silent[np.fromiter(shown_sets, dtype=np.int64, count=len(shown_sets))] = False
        others = rng.permutation(np.flatnonzero(silent))  # sorted, distinct: what np.setdiff1d gave, without its sorts
        held = min(HOLDOUT, len(others) // 2)  # half of a few held out
        ev.holdout_near_misses = others[:held].tolist()
        ev.near_misses = others[held:held + SHOWN].tolist()
        used = {*ev.pool_activating, *ev.selection_activating, *ev.holdout_activating}
        spare = active[~np.isin(active, np.fromiter(used, dtype=np.int64, count=len(used)))]
        pool = ev.pool_activating  # the feature's strongest activating segments (evidence.sample_evidence)
        sample = [*ev.holdout_activating, *rng.permutation(spare)[:CALIBRATION].tolist()]
        weight = (len(active) - len(pool)) / len(sample) if sample else 0.0
        ev.calibration = [*pool, *sample]
        order = np.argsort(active, kind="stable")  # every calibration segment activates it: its activation looked up
        at = order[np.searchsorted(active, ev.calibration, sorter=order)]
        ev.calibration_acts = acts[at].tolist()
        ev.calibration_weights = [1.0] * len(pool) + [weight] * len(sample)

    def examples(self, ev: EvidenceSet, chars: int = 160) -> list[str]:
        """The first EXAMPLES held-out near misses' texts, cut to `chars`."""
        return [" ".join(self.corpus.text(p).split())[:chars] for p in ev.holdout_near_misses[:EXAMPLES]]
