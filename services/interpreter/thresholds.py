"""Every name of a feature calibrated in one pass: which names hold on which calibration segments, and their
precision curves from one sort of the activations.

`phrases.name_holds` asks, per name and segment, whether every content or negation word of the name occurs
in the segment (by stem). Here a segment's stems are ids in one vocabulary (found once per distinct text, as a
segment is in the calibration sets of every feature it activates), the names' stems are looked up among the
feature's segments' ids at once, and `holds` [C, L] is read off a [C, K] table of the K stems the names need:
what holds_mask gave name by name, without a Python loop over segments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.interpreter.calibration import Curve
from services.interpreter.corpus import Corpus
from services.interpreter.phrases import required_words, word_stems

TEXTS_CACHED = 50_000
"""Distinct texts whose stem ids are kept (the demo's 71,298 clauses hold 15,017 texts)."""


class StemIndex:
    """Word stems of a corpus's units as ids, found by text on first use."""

    def __init__(self, corpus: Corpus, language: str) -> None:
        self.corpus, self.language = corpus, language
        self.ids: dict[str, int] = {}
        self._texts: dict[str, np.ndarray] = {}
        self._units: dict[int, np.ndarray] = {}  # position -> its text's ids, without reading the text again

    def of(self, position: int) -> np.ndarray:
        """int64 [s]: the ids of the unit's distinct stems."""
        found = self._units.get(position)
        if found is not None:
            return found
        text = self.corpus.text(position)
        found = self._texts.get(text)
        if found is None:
            if len(self._texts) >= TEXTS_CACHED:
                self._texts.clear()
                self._units.clear()
            ids = self.ids
            found = self._texts[text] = np.array(
                sorted({ids.setdefault(s, len(ids)) for s in word_stems(text, self.language)}), dtype=np.int64)
        self._units[position] = found  # the text's own array: a unit adds a pointer, not a copy
        return found

    def holds(self, positions: Sequence[int], labels: Sequence[str]) -> np.ndarray:
        """bool [len(positions), len(labels)]: phrases.name_holds of each label on each unit."""
        units = [self.of(p) for p in positions]
        needs = [required_words(label, self.language) for label in labels]
        out = np.zeros((len(units), len(labels)), dtype=bool)
        wanted = {self.ids[s] for need in needs for s in need if s in self.ids}
        if not units or not wanted:
            return out
        column = np.full(len(self.ids), -1, dtype=np.int64)  # stem id -> column of the table, -1 if no name needs it
        cols = np.fromiter(sorted(wanted), np.int64)
        column[cols] = np.arange(len(cols))
        flat = np.concatenate(units)
        rows = np.repeat(np.arange(len(units)), [len(u) for u in units])
        hit = column[flat]
        table = np.zeros((len(units), len(cols)), dtype=bool)  # [C, K]: unit holds the stem
        table[rows[hit >= 0], hit[hit >= 0]] = True
        for j, need in enumerate(needs):
            if need and all(s in self.ids for s in need):
                out[:, j] = table[:, column[[self.ids[s] for s in need]]].all(axis=1)
        return out


def precision_curves(acts: np.ndarray, holds: np.ndarray, weights: np.ndarray | None = None) -> list[Curve]:
    """calibration.precision_curve of every column of `holds` [C, L] on the same activations [C]: one sort."""
    acts = np.asarray(acts, dtype=np.float64)
    if not len(acts):
        return [Curve(np.empty(0), np.empty(0), np.empty(0, np.int64)) for _ in range(holds.shape[1])]
    order = np.argsort(-acts, kind="stable")
    a, h = acts[order], holds[order].astype(np.float64)  # [C], [C, L]
    w = np.ones(len(a)) if weights is None else np.asarray(weights, dtype=np.float64)[order]
    last = np.r_[a[1:] != a[:-1], True]  # the last of each run of equal activations: ties are all "at or above"
    n = np.arange(1, len(a) + 1)[last].astype(np.int64)
    precision = np.cumsum(w[:, None] * h, axis=0)[last] / np.cumsum(w)[last][:, None]  # [U, L]
    return [Curve(a[last], precision[:, j], n) for j in range(holds.shape[1])]
