"""Each anchor document's nearest documents, found for a batch of features at once (evidence.py's hard negatives)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from services.cpu import usable_cpus
from services.interpreter.corpus import Corpus
from services.interpreter.rows import spans

PREFETCH_THREADS = min(8, usable_cpus())
"""Threads that find a batch's neighbours, one block of anchors each (each holds a [block, SEARCHED] float32
similarity matrix while it works: 13 MB with SEARCHED = 50,000)."""


KEPT = 16_384
"""Anchors whose neighbour lists are kept between batches: 16,384 × 512 int32 = 32 MB."""
SEARCHED = 50_000
"""Distinct vectors an anchor's neighbours are searched among: all of them up to this many; past it, a fixed
sample of this many (seed 0, the same for every feature and call), so that a feature's search costs what it
costs at SEARCHED whatever the corpus's size (at 200,000 distinct vectors the exact search over all of them was
about half of a feature's naming work: a [64, U] product and a partition of each row, about 4 ms an anchor on
one core; bench/studies/results/neighbour-pool.json)."""

SAMPLE_STRIDE = 16
"""`largest` reads every SAMPLE_STRIDE-th column of a row to bound its largest values from below."""


def largest(sims: np.ndarray, depth: int, slack: np.ndarray | None = None,
            steady: Callable[[int, np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """int64 [G, depth]: the columns of each row's `depth` largest values, largest first, equal values by column
    (of several values equal to the depth-th, those of the first columns).

    With `slack` [G] and `steady`, `sims` holds approximations (each within slack / 2 of its true value) whose last
    bits may change from call to call, as a float32 product's do with the block of rows it was computed in: every
    column within slack of the depth-th largest is a candidate, and `steady(g, cols)` values those whose order
    the approximations leave open (`steady_order`) nearer the truth, the same way in every call.

    A row's values at or above a bound hold its `depth` largest whenever at least `depth` of them are, so only
    those are partitioned: the bound is the 2·depth/SAMPLE_STRIDE-th largest of every SAMPLE_STRIDE-th column
    (about 2·depth values pass it; a row where fewer than `depth` do, or whose candidates reach below it, is read
    whole). Over 50,000 columns that is a third of the time of partitioning every row whole."""
    rows, width = sims.shape
    depth = min(depth, width)
    out = np.empty((rows, depth), np.int64)
    if not rows or not depth:
        return out
    slack = np.zeros(rows) if slack is None else slack
    sample = sims[:, ::SAMPLE_STRIDE]
    rank = 2 * depth // SAMPLE_STRIDE
    kept: list[np.ndarray] | None = None
    if width >= 4 * depth and 1 <= rank <= sample.shape[1]:
        bound = np.partition(sample, sample.shape[1] - rank, axis=1)[:, sample.shape[1] - rank]  # [G]
        at, cols = np.nonzero(sims >= bound[:, None])  # row-major: each row's columns ascending
        kept = np.split(cols, np.cumsum(np.bincount(at, minlength=rows))[:-1])
    whole = np.arange(width)
    for g in range(rows):
        cols = kept[g] if kept is not None and len(kept[g]) >= depth else whole
        values = sims[g, cols]
        if len(cols) > depth:  # the candidates: within slack of the depth-th largest value, and all above it
            low = np.partition(values, len(values) - depth)[len(values) - depth] - slack[g]
            if cols is not whole and low < bound[g]:  # candidates below the bound: the whole row
                cols, values = whole, sims[g]
            keep = values >= low
            cols, values = cols[keep], values[keep]
        order = steady_order(values, slack[g], None if steady is None else lambda c: steady(g, cols[c]))
        out[g] = cols[order[:depth]]  # cols ascending: equal values by column
    return out


def steady_order(approx: np.ndarray, slack: float, steady: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray:
    """Positions of `approx` in the order of their steady values, largest first, equal ones by position. Each
    approximation is within slack / 2 of the true value and each steady value within slack / 200, so two
    approximations more than slack apart are in the steady values' order: only runs of approximations closer than
    that (clusters) are valued again, by `steady(positions)`, and ordered within themselves (without `steady`, the
    approximations' own order). -inf values (banned) are never valued: they stay last, by position."""
    order = np.argsort(-approx, kind="stable")
    if steady is None:
        return order
    close = -np.diff(approx[order]) <= slack  # [C - 1]: each value and the next in one cluster
    tied = np.zeros(len(order), bool)
    tied[:-1] |= close
    tied[1:] |= close
    at = np.flatnonzero(tied)  # every cluster's positions in `order`, contiguous, clusters in order
    if len(at):
        cluster = np.cumsum(np.concatenate([[True], ~close]))[at]
        members = order[at]
        order[at] = members[np.lexsort((members, -steady(members), cluster))]
    return order


_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _prefetch_pool() -> ThreadPoolExecutor:
    """One pool for the process: threads made once keep their malloc arenas, which threads made per
    batch would add to (measured: +330 MB of peak RSS over the 192 batches of 20,000 notes)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(PREFETCH_THREADS, thread_name_prefix="neighbours"))
        return _POOL[0]


class Neighbours:
    """Each anchor document's nearest documents (cosine; activating or not, nearest first), found for
    many anchors at once: one matrix product per `block` anchors reads the vectors once for all of
    them, where one feature at a time would read them once a feature (at 200,000 documents that read
    is most of the cost). The search runs over the *distinct* vectors: segments repeat (templates,
    stock phrases: the demo's 71,298 clauses hold 15,017 distinct texts), copies share their vector,
    and each distinct vector stands for its copies, listed in position order. The Namer prefetches a
    whole batch's anchors (`depth` distinct vectors each); `rows` falls back to an exact search over
    the distinct vectors for an anchor whose list runs short. Past SEARCHED distinct vectors, both search a fixed
    sample of SEARCHED of them (the exact nearest among the sample: hard negatives a little less near than the
    corpus's nearest, at a cost that no longer grows with the corpus)."""

    def __init__(self, corpus: Corpus, depth: int = 512, block: int = 64) -> None:
        self.corpus, self.depth, self.block = corpus, depth, block
        self._near: dict[int, np.ndarray] = {}  # distinct vector -> the distinct vectors nearest to it
        self._distinct, self._group, self._positions, self._starts = corpus.distinct
        sample = corpus.distinct_sample(SEARCHED)  # made once for the corpus, shared by every search of it
        self._pool: np.ndarray | None = None if sample is None else sample[0]
        """[SEARCHED] the distinct vectors searched, ascending (None: all of them)."""
        self._space = self._distinct if sample is None else sample[1]  # [P, d], contiguous
        self._max_norm = float(np.linalg.norm(self._distinct, axis=1).max()) if len(self._distinct) else 0.0

    def _nearest(self, groups: np.ndarray, depth: int, banned: np.ndarray | None = None, *,
                 everywhere: bool = False) -> np.ndarray:
        """[G, depth] the distinct vectors nearest to each of `groups` among those searched (`everywhere`: among
        all), nearest first (`banned` [U] excluded; depth at most the searched ones not banned).

        The float32 product finds the candidates; where it leaves their order open (values closer than its
        rounding) they are ordered by dot products in float64 (each product exact), computed one row at a time by
        numpy's pairwise sum, the same whatever the block, the thread or the process: with OpenBLAS a float32
        row's last bits depend on its slot in the block and the block's size, so on which anchors happened to
        share it, and so on which process drew a group first."""
        pool = None if everywhere else self._pool
        space = self._distinct if everywhere else self._space
        queries = self._distinct[groups]  # [G, d]
        sims = queries @ space.T  # [G, P]
        if banned is not None:
            sims[:, banned if pool is None else banned[pool]] = -np.inf
        # |float32 dot - true dot| <= d·2^-24·|q|·|v| in any order of the sum; twice that between two of them
        slack = 2.0 * queries.shape[1] * 2.0 ** -24 * np.linalg.norm(queries, axis=1) * self._max_norm * 1.01

        def steady(g: int, cols: np.ndarray) -> np.ndarray:
            products = space[cols].astype(np.float64)
            products *= queries[g].astype(np.float64)  # in place: a second [C, d] array costs more than the sums
            return products.sum(axis=1)

        top = largest(sims, depth, slack, steady)
        return top if pool is None else pool[top]

    def prefetch(self, anchors: Iterable[int]) -> None:
        """Find the neighbours of every anchor not known yet (those known are kept, up to KEPT lists: the strongest
        segments of one group of features are anchors of the next ones too; past it, only this call's). The
        blocks run on PREFETCH_THREADS threads, each product on one BLAS thread: numpy's partition and
        sort release the GIL, so the selection runs in parallel too, not only the product."""
        want = {int(g) for g in self._group[np.fromiter(anchors, np.int64)]}
        if len(self._near) + len(want - self._near.keys()) > KEPT:
            self._near = {g: v for g, v in self._near.items() if g in want}
        new = np.asarray(sorted(want - self._near.keys()), np.int64)
        depth = min(self.depth, len(self._space))
        blocks = [new[start:start + self.block] for start in range(0, len(new), self.block)]
        threads = min(len(blocks), PREFETCH_THREADS)
        if threads <= 1:
            found = [self._nearest(rows, depth) for rows in blocks]
        else:
            with threadpool_limits(limits=1, user_api="blas"):
                found = list(_prefetch_pool().map(lambda rows: self._nearest(rows, depth), blocks))
        for rows, near in zip(blocks, found):
            self._near.update(zip(rows.tolist(), near.astype(np.int32)))

    def _expand(self, groups: np.ndarray, banned: np.ndarray, m: int) -> list[int]:
        """The first m positions not banned of the copies of `groups`, in that order."""
        groups = np.asarray(groups, np.int64)
        lo, hi = self._starts[groups], self._starts[groups + 1]  # [G]: each group's copies
        sizes = hi - lo
        if not len(groups) or not sizes.sum():
            return []
        # the copies of every group, groups in order: positions[lo[i] + 0 .. sizes[i] - 1] for each i
        copies = self._positions[np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))]
        return copies[~banned[copies]][:m].tolist()

    def _expand_all(self, nears: list[np.ndarray | None], banned: np.ndarray, n_banned: int,
                    m: int) -> list[np.ndarray]:
        """`_expand(near, banned, m)` of every list of `nears` (an empty result for None), in one gather; only the
        first groups of a list that hold m + n_banned copies (`banned` has n_banned) are looked at."""
        known = [i for i, near in enumerate(nears) if near is not None]
        out = [np.empty(0, np.int64)] * len(nears)
        if not known:
            return out
        lists = []
        for i in known:
            near = nears[i].astype(np.int64)  # type: ignore[union-attr]
            held = np.cumsum(self._starts[near + 1] - self._starts[near])  # copies of its first 1, 2, … groups
            lists.append(near[: int(np.searchsorted(held, m + n_banned)) + 1])
        groups = np.concatenate(lists)
        owner = np.repeat(np.arange(len(known)), [len(g) for g in lists])
        lo, hi = self._starts[groups], self._starts[groups + 1]
        copies, owner = self._positions[spans(lo, hi)], np.repeat(owner, hi - lo)  # every copy, in _expand's order
        kept = ~banned[copies]
        copies, owner = copies[kept], owner[kept]
        sizes = np.bincount(owner, minlength=len(known))
        rank = np.arange(len(owner)) - (np.cumsum(sizes) - sizes)[owner]  # place among its own list's kept copies
        copies, owner = copies[rank < m], owner[rank < m]
        ends = np.cumsum(np.bincount(owner, minlength=len(known)))
        for j, i in enumerate(known):
            out[i] = copies[(ends[j - 1] if j else 0):ends[j]]
        return out

    def rows(self, anchors: np.ndarray, active: np.ndarray, m: int) -> np.ndarray:
        """[A, m]: each anchor's m nearest non-activating positions, nearest first (m <= non-activating)."""
        banned = np.zeros(self.corpus.n_docs, bool)
        banned[active] = True
        taken: np.ndarray | None = None  # [U]: distinct vectors whose every copy is banned (found once)
        free = free_searched = 0  # distinct vectors not taken: of all, of those searched (found with `taken`)
        found = self._expand_all([self._near.get(int(g)) for g in self._group[anchors].tolist()], banned,
                                  len(active), m)
        out = []
        for a, kept in zip(anchors.tolist(), found):
            g = int(self._group[a])
            if len(kept) < m:  # unknown, or too many activating neighbours: exact search over the rest
                if taken is None:
                    taken = np.ones(len(self._distinct), bool)
                    taken[self._group[~banned]] = False
                    free = len(taken) - int(taken.sum())
                    free_searched = free if self._pool is None else len(self._pool) - int(taken[self._pool].sum())
                depth = min(m, free_searched)
                kept = self._expand(self._nearest(np.array([g]), depth, taken)[0], banned, m) if depth else []
                if len(kept) < m:  # the sample holds too few non-activating copies: all the distinct vectors
                    depth = min(m, free)
                    kept = self._expand(self._nearest(np.array([g]), depth, taken, everywhere=True)[0], banned, m)
            out.append(np.asarray(kept, np.int64))
        return np.stack(out)
