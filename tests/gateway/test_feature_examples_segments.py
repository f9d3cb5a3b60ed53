"""The feature page's examples on a run with segment codes: each note's mark is its segment where the
feature is strongest (what makes the note fire: a note's code is the max over its segments)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gateway.dashboard.feature_examples import excerpt, strongest_segments
from gateway.search.expressions import SegmentCodes


def test_the_strongest_segment_of_each_note_against_a_loop() -> None:
    rng = np.random.default_rng(3)
    per_doc = rng.integers(0, 6, size=40)  # notes with 0 to 5 segments
    doc = np.repeat(np.arange(40), per_doc)
    dense = rng.random((len(doc), 7)) * (rng.random((len(doc), 7)) < 0.3)  # [segments, features], sparse-ish
    spans = np.stack([np.arange(len(doc)) * 10, np.arange(len(doc)) * 10 + 7], axis=1)
    segments = SegmentCodes(sp.csc_matrix(dense.astype(np.float32)), doc, spans)
    positions = [int(p) for p in rng.permutation(40)[:25]]
    for feature in range(7):
        got = strongest_segments(segments, feature, positions)
        expected = {}
        for p in positions:
            rows = np.flatnonzero(doc == p)
            if len(rows) and dense[rows, feature].max() > 0:
                s = rows[int(np.argmax(dense[rows, feature]))]
                expected[p] = (int(spans[s, 0]), int(spans[s, 1]))
        assert got == expected


def test_the_excerpt_marks_the_segment() -> None:
    text = "Motivo: tosse. " * 40 + "Diagnosi: bronchiolite acuta. " + "Terapia: lavaggi nasali. " * 20
    start = text.index("Diagnosi")
    cut = excerpt(text, (start, start + len("Diagnosi: bronchiolite acuta.")))
    assert cut.chunk == "Diagnosi: bronchiolite acuta." and cut.cut_start and cut.cut_end
    assert len(cut.before) + len(cut.chunk) + len(cut.after) <= 420
