"""Every name of a feature calibrated in one pass: which names hold on which calibration segments, and their
precision curves from one sort of the activations.

`phrases.name_holds` asks, per name and segment, whether every content or negation word of the name occurs
in the segment (by stem). Here a segment's stems are ids in one vocabulary (found once per distinct text, as a
segment is in the calibration sets of every feature it activates), the names' stems are looked up among the
feature's segments' ids at once, and `holds` [C, L] is read off a [C, K] table of the K stems the names need:
what holds_mask gave name by name, without a Python loop over segments.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from services.interpreter.calibration import Curve
from services.interpreter.corpus import Corpus
from services.interpreter.backends.term_scan import SHORT_TEXT
from services.interpreter.backends.words import fold, surfaces
from services.interpreter.phrases import required_words, stem
from services.interpreter.rows import spans

TEXT_BLOCK = 65_536
"""Units whose texts are read from the corpus at once while the index is built."""


class StemIndex:
    """Word stems of a corpus's units as ids: each distinct text's stems found once, on first use, for the whole
    corpus (a feature's calibration segments are then gathered in one step, not looked up one by one)."""

    def __init__(self, corpus: Corpus, language: str) -> None:
        self.corpus, self.language = corpus, language
        self.ids: dict[str, int] = {}
        self._text_of: np.ndarray | None = None  # int64 [N]: each unit's distinct text
        self._starts = np.zeros(1, np.int64)  # int64 [T + 1]: text t's stem ids are _stems[_starts[t]:_starts[t + 1]]
        self._stems = np.empty(0, np.int32)

    def _build(self) -> np.ndarray:
        """Each distinct text's stems (phrases.word_stems), as ids: its distinct words as written, each one's
        stem id found once for the corpus (words recur: folding and stemming them per text was most of the cost)."""
        texts: dict[str, int] = {}  # short text -> its entry (clauses repeat; notes are rarely copies, not kept)
        ids, stems, starts = self.ids, array("i"), array("q", [0])  # compact: no Python list per text
        text_of = np.empty(self.corpus.n_docs, np.int64)
        stem_id: dict[str, int] = {}  # a word as written (lower case) -> its stem's id
        language = self.language

        def add(surface: str) -> int:
            i = stem_id[surface] = ids.setdefault(stem(fold(surface), language), len(ids))
            return i

        for start in range(0, self.corpus.n_docs, TEXT_BLOCK):
            block = self.corpus.texts.slice(start, TEXT_BLOCK).to_pylist()
            for p, text in enumerate(block, start):
                text = text or ""
                t = texts.get(text) if len(text) <= SHORT_TEXT else None
                if t is None:
                    t = len(starts) - 1
                    if len(text) <= SHORT_TEXT:
                        texts[text] = t
                    stems.extend(sorted({stem_id[w] if w in stem_id else add(w) for w in surfaces(text)}))
                    starts.append(len(stems))
                text_of[p] = t
        self._starts = np.frombuffer(starts, np.int64)
        self._stems = np.frombuffer(stems, np.int32)
        self._text_of = text_of
        return text_of

    def of(self, position: int) -> np.ndarray:
        """int32 [s]: the ids of the unit's distinct stems, ascending."""
        text_of = self._text_of if self._text_of is not None else self._build()
        t = int(text_of[position])
        return self._stems[self._starts[t]:self._starts[t + 1]]

    def holds(self, positions: Sequence[int], labels: Sequence[str]) -> np.ndarray:
        """bool [len(positions), len(labels)]: phrases.name_holds of each label on each unit."""
        text_of = self._text_of if self._text_of is not None else self._build()
        texts = text_of[np.asarray(positions, dtype=np.int64)]  # [C]
        needs = [required_words(label, self.language) for label in labels]
        out = np.zeros((len(texts), len(labels)), dtype=bool)
        wanted = {self.ids[s] for need in needs for s in need if s in self.ids}
        if not len(texts) or not wanted:
            return out
        column = np.full(len(self.ids), -1, dtype=np.int64)  # stem id -> column of the table, -1 if no name needs it
        cols = np.fromiter(sorted(wanted), np.int64)
        column[cols] = np.arange(len(cols))
        lo, hi = self._starts[texts], self._starts[texts + 1]
        flat = self._stems[spans(lo, hi)]  # every unit's stem ids, unit by unit
        rows = np.repeat(np.arange(len(texts)), hi - lo)
        hit = column[flat]
        table = np.zeros((len(texts), len(cols)), dtype=bool)  # [C, K]: unit holds the stem
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
