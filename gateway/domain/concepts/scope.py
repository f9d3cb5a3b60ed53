"""A probe's segment scope: with `segment_words`, a document's codes are the max over only those of
its segments whose text contains one of the words (case-insensitive), not over all of them.

The word finds the mention ("bronchiolit"); the features read its status in that segment, free of
the note's other conditions. Measured in bench/status.py (`probe_anchored`, demo corpus, held-out
quarter): F1 0.989 with 21 features, against 0.925 for TF-IDF + LR on the text of the same
segments and 0.867 for TF-IDF on the whole note. A document with no such segment has no codes.
Texts are read from the documents table in batches (never logged); only the matching segments'
indices are kept, so memory is bounded by the run's segment codes.

Which segments match is decided here alone (`matching_segments`), for the probe's codes and for
the words-alone baseline on the same segments (`SegmentScope.texts`): a segment matches when one
of the casefolded words occurs in its casefolded text, `word.casefold() in text[a:b].casefold()`.
It is found per batch of documents, not per segment: one regex of the escaped words over the
batch's casefolded texts, every start position found once (overlapping occurrences included),
then each segment tested against the occurrences with `np.searchsorted` (bench/scope.py).
A probe's creation and re-evaluation find them once (`SegmentScope.found`) for every labelled
document and hand the scope to both the probe's codes and the baseline, which then only slices.

With `context` (`probe_codes(..., context=True)`), a probe reads [the scope's codes, the note's own codes]:
each feature twice, on the segments that name the topic and on the whole note. A scoped probe is fitted
both ways and keeps the one that cross-validates better on its training split (service.train_scoped_probe):
on NegEx a list carries a negation into a clause of its own ("no fever, chills, or [cough]"), which the
scope alone cannot see (bench/scope_context.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from contracts.sparse import max_pool_rows
from gateway.db import session_scope
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.texts import texts_at
from gateway.search.expressions import SearchSpace, SegmentCodes


def _occurrences(text: str, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) int64, starts ascending: at every position of `text` where a word begins, the
    shortest word beginning there (the alternation lists them shortest first; the search restarts one
    character after each start, so occurrences that overlap are all found)."""
    needles = sorted(set(words), key=lambda w: (len(w), w))
    pattern = re.compile("|".join(map(re.escape, needles)))
    starts: list[int] = []
    ends: list[int] = []
    found = pattern.search(text)
    while found is not None:
        starts.append(found.start())
        ends.append(found.end())
        found = pattern.search(text, found.start() + 1)
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def _folded_offsets(text: str) -> np.ndarray:
    """int64 [len(text) + 1]: each offset of `text` as an offset of `text.casefold()`. Casefold maps
    each character on its own to one or more (`ß` -> `ss`; only non-ASCII ones to more), so the map is
    the running sum of the characters' folded lengths, looked up once per distinct character."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    sizes = np.ones(len(points), dtype=np.int64)
    wide = np.flatnonzero(points > 127)
    chars, which = np.unique(points[wide], return_inverse=True)
    sizes[wide] = np.array([len(chr(c).casefold()) for c in chars.tolist()], dtype=np.int64)[which]
    return np.concatenate([[0], np.cumsum(sizes)])


def matching_segments(texts: Sequence[str], owner: np.ndarray, spans: np.ndarray, words: Sequence[str]) -> np.ndarray:
    """bool [segments]: whether segment i, `texts[owner[i]][spans[i, 0]:spans[i, 1]]` (spans
    non-negative), contains one of `words`, casefolded on both sides: exactly
    `any(w.casefold() in piece.casefold() for w in words)`, not re.IGNORECASE (`strasse` is in `Straße`).

    The texts are joined and casefolded; an occurrence (start p, end e) lies in a segment [a, b) when
    a <= p and e <= b, so a segment matches when the least end among the occurrences starting at or
    after a (a suffix minimum, indexed by `searchsorted`) is at most b. An occurrence across two texts
    ends past every segment of the first, so the join adds none."""
    owner = np.asarray(owner, dtype=np.int64)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if not len(owner) or not words:
        return np.zeros(len(owner), dtype=bool)
    joined = "".join(texts)
    folded = joined.casefold()
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    base = np.concatenate([[0], np.cumsum(lengths)])[owner]  # each segment's text's offset in the join
    start = np.clip(spans[:, 0], 0, lengths[owner])  # past the end is the end, and an end before the
    end = np.clip(spans[:, 1], start, lengths[owner])  # start an empty segment, as in a slice
    start, end = start + base, end + base
    if len(folded) != len(joined):  # a character folds to more than one: offsets move
        moved = _folded_offsets(joined)
        start, end = moved[start], moved[end]
    starts, ends = _occurrences(folded, [w.casefold() for w in words])
    if not len(starts):
        return np.zeros(len(owner), dtype=bool)
    least_end = np.minimum.accumulate(ends[::-1])[::-1]  # least end among occurrences i, i+1, …
    first = np.searchsorted(starts, start, "left")
    return (first < len(starts)) & (least_end[np.minimum(first, len(starts) - 1)] <= end)


def segments_holding(owner: np.ndarray, spans: np.ndarray, mentions: Sequence[Sequence[tuple[int, int]]]) -> np.ndarray:
    """bool [segments]: whether segment i (`spans[i]` = [a, b) in text `owner[i]`) overlaps one of its text's
    `mentions` ([start, end) character offsets, as an annotation tool or a NER step gives them: a < end and
    start < b, so a mention across a clause boundary is held by both clauses)."""
    owner = np.asarray(owner, dtype=np.int64)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    found = np.zeros(len(owner), dtype=bool)
    if not len(owner):
        return found
    flat = [(t, int(s), int(e)) for t, ms in enumerate(mentions) for s, e in ms if e > s]
    if not flat:
        return found
    text, start, end = (np.array(column, dtype=np.int64) for column in zip(*flat))
    order = np.argsort(owner, kind="stable")  # each text's segments, contiguous
    first = np.searchsorted(owner[order], text, "left")
    last = np.searchsorted(owner[order], text, "right")
    for lo, hi, s, e in zip(first.tolist(), last.tolist(), start.tolist(), end.tolist()):
        rows = order[lo:hi]
        found[rows[(spans[rows, 0] < e) & (s < spans[rows, 1])]] = True
    return found


@dataclass(frozen=True)
class SegmentScope:
    """The segments a scoped probe reads: those of a run's segments whose text contains one of `words`."""

    segments: SegmentCodes
    words: tuple[str, ...]
    hits: np.ndarray | None = None  # matching segments already found (ascending) for the documents at
    found_for: np.ndarray | None = None  # these positions (ascending, unique)

    def found(self, factory: Any, dataset_id: int, positions: np.ndarray) -> SegmentScope:
        """This scope with the matching segments of the documents at `positions` found (one read of
        their texts): `matching` then slices instead of reading and matching again."""
        positions = np.unique(positions)
        return replace(self, hits=scoped_segments(factory, dataset_id, self, positions), found_for=positions)

    def known(self, positions: np.ndarray) -> np.ndarray | None:
        """The found matching segments of the documents at `positions`, or None if not all were found."""
        if self.hits is None or self.found_for is None or len(positions) == 0:
            return None
        at = np.minimum(np.searchsorted(self.found_for, positions), len(self.found_for) - 1)
        if not np.array_equal(self.found_for[at], positions):
            return None
        return self.hits[np.isin(self.segments.doc[self.hits], positions)]

    def matching(self, positions: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Indices (ascending) of the matching segments of the documents at `positions` (ascending,
        unique; `texts` theirs)."""
        known = self.known(positions)
        if known is not None:
            return known
        lo = np.searchsorted(self.segments.doc, positions, "left")
        counts = np.searchsorted(self.segments.doc, positions, "right") - lo
        owner = np.repeat(np.arange(len(positions)), counts)
        index = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
        return index[matching_segments(texts, owner, self.segments.spans[index], self.words)]

    def texts(self, positions: np.ndarray, texts: Sequence[str]) -> list[str]:
        """For each document, the text of its matching segments joined with " " ("" when none matches)."""
        pieces: list[list[str]] = [[] for _ in texts]
        hits = self.matching(positions, texts)
        owners = np.searchsorted(positions, self.segments.doc[hits])
        for owner, (a, b) in zip(owners.tolist(), self.segments.spans[hits].tolist()):
            pieces[owner].append(texts[owner][a:b])
        return [" ".join(p) for p in pieces]


def segment_scope(space: SearchSpace, words: Sequence[str] | None) -> SegmentScope | None:
    """The scope of a probe with segment words on this run, or None without words."""
    if not words:
        return None
    segments = space.segment_codes()
    if segments is None:
        raise ConceptInputError("segment_words: the SAE run has no segment codes (train it on an embedding run "
                                "with segments, with max_over_segments)", field="segment_words")
    return SegmentScope(segments, tuple(words))


def scoped_segments(factory: Any, dataset_id: int, scope: SegmentScope, positions: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the segments of the documents at `positions` whose text contains a word."""
    positions = np.unique(positions)
    known = scope.known(positions)
    if known is not None:
        return known
    hits: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    with session_scope(factory) as session:
        for batch, texts in texts_at(session, dataset_id=dataset_id, positions=positions):
            hits.append(scope.matching(batch, texts))
    return np.concatenate(hits)


def probe_codes(factory: Any, dataset_id: int, space: SearchSpace, scope: SegmentScope | None,
                positions: np.ndarray, *, context: bool = False) -> sp.csr_matrix:
    """[docs, n] CSR codes a probe reads: the run's document codes, or, with a segment scope, the max
    over each document's matching segments (rows of `positions` only; the others are empty). With
    `context` (a scoped probe only), [docs, 2n]: those, then the document's own codes, so that each
    feature is read twice, on the segments that name the topic and on the whole note."""
    if scope is None:
        return space.codes.tocsr()
    hits = scoped_segments(factory, dataset_id, scope, positions)
    scoped = max_pool_rows(scope.segments.codes[hits].tocsr(), scope.segments.doc[hits], space.n_docs)
    return with_context(scoped, space) if context else scoped


def with_context(scoped: sp.csr_matrix, space: SearchSpace) -> sp.csr_matrix:
    """[docs, 2n]: a scope's codes, then the documents' own (what a probe with context reads)."""
    return sp.hstack([scoped, space.codes.tocsr()], format="csr")
