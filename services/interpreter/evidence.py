"""Evidence for naming a feature, and the held-out documents its names are scored on.

For one feature: held-out activating documents are drawn at random first (so they represent
the whole activation distribution), then the shown activating documents are drawn evenly
across activation quantile bins of the rest (the strongest of the top bin, random in the
others); non-activating documents are random ones and *hard negatives*, the non-activating
documents nearest (cosine of document vectors) to the activating ones: by default each of the
10 strongest non-held-out activating documents' nearest in turn (as delphi's FAISS constructor
takes the neighbours of activating examples), or (`hard_negatives_from="centroid"`) those
nearest to the activating documents' centroid — a harder set for the embedding scorer, whose
label vectors tend towards that centroid. Hard negatives are split alternately between
held-out and shown, nearest first, so both get the same hardness.
Held-out and shown sets are disjoint by construction, and `EvidenceSet` checks it.

Excerpts are centred on the chunk where the feature is strongest: the document's chunk
vectors (embedder provenance) go through the SAE encoder, and the excerpt is cut around the
best chunk's character span.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from contracts.interpret import EvidenceConfig, EvidenceIds
from services.interpreter.calibration import even_ranks
from services.interpreter.corpus import Corpus
from services.interpreter.neighbours import Neighbours


class FeatureTooRare(ValueError):
    """The feature fires on fewer documents than EvidenceConfig.min_activating."""


@dataclass
class EvidenceSet:
    feature: int
    n_activating: int
    activating: list[int]
    """Shown activating positions, strongest first."""
    activations: list[float]
    random_negatives: list[int]
    hard_negatives: list[int]
    holdout_activating: list[int]
    holdout_non_activating: list[int]
    pool_activating: list[int] = field(default_factory=list)
    """Every non-held-out activating document (capped): term statistics use these."""
    pool_non_activating: list[int] = field(default_factory=list)
    selection_activating: list[int] = field(default_factory=list)
    """Non-held-out activating documents across activation ranks: candidates are compared on these."""
    selection_hard: list[int] = field(default_factory=list)
    """Hard negatives never held out (the shown ones, then the next nearest): candidates must exclude them."""
    selection_random: list[int] = field(default_factory=list)
    """Random non-activating documents never held out, as many as selection_hard (the held-out mix)."""
    near_misses: list[int] = field(default_factory=list)
    """Near misses phrases are contrasted with (near_misses.py); never held out."""
    holdout_near_misses: list[int] = field(default_factory=list)
    """Near misses the near-miss score is measured on, never shown."""
    calibration: list[int] = field(default_factory=list)
    """Activating segments a name's threshold is calibrated on: the pool's (its strongest) and a sample of the rest."""
    calibration_acts: list[float] = field(default_factory=list)
    calibration_weights: list[float] = field(default_factory=list)
    """The activating segments of the corpus each calibration segment stands for (precision_curve's weights)."""

    def __post_init__(self) -> None:
        shown = {*self.activating, *self.random_negatives, *self.hard_negatives,
                 *self.pool_activating, *self.pool_non_activating, *self.selection_activating,
                 *self.selection_hard, *self.selection_random}
        held = {*self.holdout_activating, *self.holdout_non_activating}
        if shown & held:
            raise AssertionError(f"feature {self.feature}: held-out documents in the evidence")

    @property
    def non_activating(self) -> list[int]:
        """Shown negatives, hard and random interleaved (hard first)."""
        out: list[int] = []
        for i in range(max(len(self.hard_negatives), len(self.random_negatives))):
            out += self.hard_negatives[i:i + 1] + self.random_negatives[i:i + 1]
        return out

    def ids(self, *, pools: bool = False) -> EvidenceIds:
        """What to store with an interpretation (pools: what a keywords back-end counted)."""
        return EvidenceIds(
            activating=self.pool_activating if pools else self.activating,
            random_negatives=self.pool_non_activating if pools else self.random_negatives,
            hard_negatives=self.hard_negatives, holdout_activating=self.holdout_activating,
            holdout_non_activating=self.holdout_non_activating, near_misses=self.near_misses,
            holdout_near_misses=self.holdout_near_misses)


def feature_rng(seed: int, feature: int) -> np.random.Generator:
    """The same (seed, feature) always gives the same draws, so a resumed run repeats them."""
    return np.random.default_rng([seed, feature])


def quantile_sample(order: np.ndarray, m: int, bins: int, rng: np.random.Generator) -> np.ndarray:
    """m items of `order` (sorted strongest first), spread over `bins` equal-rank bins.

    The top bin gives its strongest items, the other bins random ones; result in `order`'s order.
    """
    if m >= len(order):
        return order
    bins = max(1, min(bins, m))
    edges = np.linspace(0, len(order), bins + 1).astype(int)
    per_bin = np.full(bins, m // bins)
    per_bin[: m % bins] += 1
    picked: list[np.ndarray] = [np.arange(edges[0], edges[0] + min(per_bin[0], edges[1] - edges[0]))]
    for b in range(1, bins):
        size = edges[b + 1] - edges[b]
        picked.append(edges[b] + rng.choice(size, min(per_bin[b], size), replace=False))
    taken = np.sort(np.concatenate(picked))
    if len(taken) < m:  # a bin was smaller than its share: fill from what is left, top first
        rest = np.setdiff1d(np.arange(len(order)), taken)
        taken = np.sort(np.concatenate([taken, rest[: m - len(taken)]]))
    return order[taken]


def random_excluding(n: int, m: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """m distinct positions of [0, n) not in `excluded`, by rejection (features are sparse)."""
    if m <= 0:
        return np.empty(0, np.int64)
    banned = np.zeros(n, bool)
    banned[excluded] = True
    available = n - int(banned.sum())
    m = min(m, available)
    if available <= 4 * m:
        return rng.choice(np.flatnonzero(~banned), m, replace=False)
    out: list[np.ndarray] = []
    wanted = m
    while wanted:
        drawn = rng.integers(0, n, 2 * wanted)
        drawn = drawn[~banned[drawn]]
        _, first = np.unique(drawn, return_index=True)
        kept = drawn[np.sort(first)][:wanted]  # each allowed position at its first draw, in the order drawn
        banned[kept] = True
        out.append(kept)
        wanted -= len(kept)
    return np.concatenate(out).astype(np.int64)


def hard_negatives(corpus: Corpus, centre_rows: np.ndarray, active: np.ndarray, m: int) -> np.ndarray:
    """The m non-activating positions nearest (cosine) to the centroid of `centre_rows`, nearest first."""
    if m <= 0:
        return np.empty(0, np.int64)
    centroid = corpus.vectors[centre_rows].mean(0)  # [d]
    return nearest_outside(corpus.vectors @ centroid, active, m)  # rows are unit-norm: this ranks by cosine


def nearest_outside(sims: np.ndarray, active: np.ndarray, m: int) -> np.ndarray:
    """The (at most) m positions of the largest `sims` [N] outside `active`, largest first; `sims` is
    overwritten at `active`."""
    sims[active] = -np.inf
    m = min(m, len(sims) - len(active))
    if m <= 0:
        return np.empty(0, np.int64)
    top = np.argpartition(-sims, m - 1)[:m]
    return top[np.argsort(-sims[top])].astype(np.int64)


def neighbour_negatives(corpus: Corpus, anchors: np.ndarray, active: np.ndarray, m: int,
                        neighbours: Neighbours | None = None) -> np.ndarray:
    """m non-activating positions, each the nearest (cosine) not yet taken to one of `anchors` in turn
    (activating documents, strongest first): every anchor's nearest, then every anchor's second…
    `neighbours` holds the anchors' neighbours found beforehand (else they are searched here)."""
    m = min(m, corpus.n_docs - len(active))
    if m <= 0 or len(anchors) == 0:
        return np.empty(0, np.int64)
    if neighbours is None:
        neighbours = Neighbours(corpus, depth=m + len(active))
        neighbours.prefetch(anchors)
    near = neighbours.rows(anchors, active, m).T.ravel()  # [m * A]: rank by rank, anchors in order
    _, first = np.unique(near, return_index=True)
    return near[np.sort(first)][:m].astype(np.int64)  # each position where first met


def split_alternating(items: np.ndarray, n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Deal items (nearest first) alternately to a and b, a first, until each is full."""
    a: list[int] = []
    b: list[int] = []
    for i, x in enumerate(items.tolist()):
        if len(a) < n_a and (i % 2 == 0 or len(b) >= n_b):
            a.append(x)
        elif len(b) < n_b:
            b.append(x)
    return np.asarray(a, np.int64), np.asarray(b, np.int64)


def _split(corpus: Corpus, feature: int,
           cfg: EvidenceConfig) -> tuple[np.random.Generator, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The feature's activating documents split into held-out and the rest (strongest first), and
    the generator, ready for the next draws."""
    rng = feature_rng(cfg.seed, feature)
    active, acts = corpus.column(feature)
    if len(active) < cfg.min_activating:
        raise FeatureTooRare(f"feature {feature} fires on {len(active)} documents (< {cfg.min_activating})")
    n_hold = min(cfg.holdout_activating, len(active) // 2)
    hold_mask = np.zeros(len(active), bool)
    hold_mask[rng.choice(len(active), n_hold, replace=False)] = True
    rest, rest_acts = active[~hold_mask], acts[~hold_mask]
    return rng, active, hold_mask, rest, rest_acts, np.argsort(-rest_acts, kind="stable")


def anchors_of(corpus: Corpus, feature: int, cfg: EvidenceConfig) -> np.ndarray:
    """The activating documents whose neighbours `sample_evidence` takes as hard negatives (none for
    the centroid kind, or a feature too rare to name)."""
    if cfg.hard_negatives_from != "neighbours":
        return np.empty(0, np.int64)
    try:
        _, _, _, rest, _, order = _split(corpus, feature, cfg)
    except FeatureTooRare:
        return np.empty(0, np.int64)
    return rest[order[: cfg.hard_negative_anchors]]


def sample_evidence(corpus: Corpus, feature: int, cfg: EvidenceConfig, *, pool: int = 0,
                    neighbours: Neighbours | None = None) -> EvidenceSet:
    """Shown and held-out documents for `feature` (positions); `pool` > 0 adds term-statistics pools;
    `neighbours`: the anchors' neighbours found beforehand for a batch of features (Namer)."""
    rng, active, hold_mask, rest, rest_acts, order = _split(corpus, feature, cfg)
    shown = quantile_sample(order, cfg.activating, cfg.quantiles, rng)
    hold_hard = cfg.holdout_non_activating // 2
    n_near = hold_hard + cfg.hard_negatives + cfg.selection_hard_negatives
    if cfg.hard_negatives_from == "neighbours":
        nearest = neighbour_negatives(corpus, rest[order[: cfg.hard_negative_anchors]], active, n_near, neighbours)
    else:
        nearest = hard_negatives(corpus, rest, active, n_near)
    hard = nearest[: hold_hard + cfg.hard_negatives]
    hard_hold, hard_shown = split_alternating(hard, hold_hard, cfg.hard_negatives)
    used = np.concatenate([active, hard])
    rand = random_excluding(corpus.n_docs, cfg.holdout_non_activating - len(hard_hold) + cfg.random_negatives,
                            used, rng)
    n_rand_hold = cfg.holdout_non_activating - len(hard_hold)
    rand_hold, rand_shown = rand[:n_rand_hold], rand[n_rand_hold:]
    pool_neg: list[int] = []
    extra = np.empty(0, np.int64)
    if pool:
        extra = random_excluding(corpus.n_docs, pool, np.concatenate([used, rand]), rng)
        pool_neg = [*rand_shown.tolist(), *hard_shown.tolist(), *extra.tolist()]
    # drawn after the held-out sets, so that those stay what they were without a selection set
    sel_hard = [*hard_shown.tolist(), *np.setdiff1d(nearest[len(hard):], rand_hold, assume_unique=True).tolist()]
    near = set(nearest.tolist())
    sel_random = [x for x in [*rand_shown.tolist(), *extra.tolist()] if x not in near][: len(sel_hard)]
    ranks = even_ranks(len(order), min(cfg.selection_activating, len(order)))
    return EvidenceSet(
        feature=feature, n_activating=len(active), activating=rest[shown].tolist(),
        activations=rest_acts[shown].astype(float).tolist(), random_negatives=rand_shown.tolist(),
        hard_negatives=hard_shown.tolist(), holdout_activating=active[hold_mask].tolist(),
        holdout_non_activating=[*hard_hold.tolist(), *rand_hold.tolist()],
        pool_activating=rest[order[:pool]].tolist() if pool else [], pool_non_activating=pool_neg,
        selection_activating=rest[order[ranks]].tolist(), selection_hard=sel_hard, selection_random=sel_random)


# -- excerpts ---------------------------------------------------------------------------------
def strongest_chunk(corpus: Corpus, position: int, feature: int) -> tuple[int, int] | None:
    """(char_start, char_end) of the document's chunk where `feature` is strongest; None if one chunk."""
    chunks, sae = corpus.chunks, corpus.sae
    if chunks is None or sae is None:
        return None
    rows = chunks.rows(position)
    if len(rows) <= 1:
        return None
    v = chunks.vectors[rows.start:rows.stop].astype(np.float32)  # [c, d]
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)  # the SAE saw unit-norm documents
    act = sae.feature_activation(v, feature)  # [c]
    # where the top-k drops the feature in every chunk, the pre-activation still ranks them
    best = int(np.argmax(act)) if act.max() > 0 else int(np.argmax(sae.feature_preactivation(v, feature)))
    r = rows.start + best
    return int(chunks.char_start[r]), int(chunks.char_end[r])


def cut_excerpt(text: str, span: tuple[int, int] | None, max_chars: int) -> str:
    """At most max_chars of text centred on span (the start if None), cut at spaces, '…' at cuts."""
    if len(text) <= max_chars:
        return text
    centre = len(text) // 2 if span is None else (span[0] + span[1]) // 2
    start = 0 if span is None else max(0, min(centre - max_chars // 2, len(text) - max_chars))
    end = start + max_chars
    if start > 0:
        space = text.find(" ", start, start + 40)
        start = space + 1 if space >= 0 else start
    if end < len(text):
        space = text.rfind(" ", end - 40, end)
        end = space if space > start else end
    return ("…" if start > 0 else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def excerpts(corpus: Corpus, feature: int, positions: list[int], max_chars: int) -> list[str]:
    """One excerpt per position, centred on its strongest chunk for `feature`."""
    return [cut_excerpt(corpus.text(p), strongest_chunk(corpus, p, feature), max_chars) for p in positions]
