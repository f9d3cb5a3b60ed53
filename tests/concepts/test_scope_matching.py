"""Which segments a scoped probe reads (`scope.matching_segments`, one regex per batch and
`searchsorted`) is exactly the per-segment reference, `any(w.casefold() in piece.casefold())`, on
thousands of random small texts, spans and words (seeded): overlapping occurrences of different
words, an occurrence across a segment boundary or across two texts, characters whose casefold is
longer (`ß` -> `ss`, `İ` -> `i̇`, `ﬁ` -> `fi`), spans past the end, reversed, empty or overlapping.
The joined segment texts are the baseline's input: "" where no word occurs."""

from __future__ import annotations

import numpy as np

from gateway.domain.concepts.scope import SegmentScope, matching_segments
from gateway.search.expressions import SegmentCodes

ALPHABET = list("abAB sSßẞiIİ\u0307ﬁfFΣσςKk.")  # K is the Kelvin sign: its casefold is k


def reference(texts: list[str], owner: np.ndarray, spans: np.ndarray, words: list[str]) -> np.ndarray:
    needles = [w.casefold() for w in words]
    return np.array([any(n in texts[o][a:b].casefold() for n in needles)
                     for o, (a, b) in zip(owner.tolist(), spans.tolist())], dtype=bool)


def random_case(rng: np.random.Generator) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    texts = ["".join(rng.choice(ALPHABET, size=rng.integers(0, 25))) for _ in range(rng.integers(1, 5))]
    owner = np.sort(rng.integers(0, len(texts), size=rng.integers(0, 12)))
    starts = rng.integers(0, 28, size=len(owner))
    ends = np.maximum(starts + rng.integers(-2, 10, size=len(owner)), 0)  # spans are non-negative; some reversed
    spans = np.stack([starts, ends], axis=1).reshape(-1, 2)
    words = []
    for _ in range(rng.integers(1, 4)):
        source = texts[rng.integers(len(texts))]
        if source and rng.random() < 0.6:  # a piece of a text, re-cased: it occurs somewhere
            a = int(rng.integers(len(source)))
            piece = source[a : a + int(rng.integers(1, 4))]
            words.append(piece.upper() if rng.random() < 0.3 else piece)
        else:
            words.append("".join(rng.choice(ALPHABET, size=rng.integers(1, 4))))
    return texts, owner, spans, words


def test_matches_the_per_segment_reference_on_random_cases() -> None:
    rng = np.random.default_rng(20261125)
    matched = shifted = 0
    for case in range(3000):
        texts, owner, spans, words = random_case(rng)
        want = reference(texts, owner, spans, words)
        got = matching_segments(texts, owner, spans, words)
        assert got.dtype == bool and np.array_equal(got, want), (case, texts, owner.tolist(), spans.tolist(), words)
        matched += int(want.sum())
        shifted += sum(w and len(texts[o].casefold()) != len(texts[o]) for w, o in zip(want, owner.tolist()))
    assert matched > 1500 and shifted > 1000  # segments do match, in texts whose casefold is longer too


def test_the_edges_by_hand() -> None:
    texts = ["abc", "Straße xy", "x STRASSE"]
    owner = np.array([0, 0, 1, 1, 2])
    spans = np.array([[0, 1], [1, 3], [0, 6], [6, 9], [0, 9]])
    # "ab" starts first at 0 but spans the boundary; "bc" overlaps it and lies in [1, 3)
    assert matching_segments(texts, owner, spans, ["ab", "bc"]).tolist() == [False, True, False, False, False]
    # casefold semantics, not re.IGNORECASE: "strasse" is in "Straße" (ß folds to ss), and offsets
    # after the ß are shifted by one in the folded text, the next segment's too
    assert matching_segments(texts, owner, spans, ["STRASSE"]).tolist() == [False, False, True, False, True]
    assert matching_segments(texts, owner, spans, ["e x"]).tolist() == [False] * 5  # across two segments only
    assert matching_segments(texts, owner, spans, ["cst"]).tolist() == [False] * 5  # across two texts only
    assert matching_segments(texts, owner, spans, []).tolist() == [False] * 5


def test_scope_texts_join_the_matching_segments_and_leave_the_others_empty() -> None:
    texts = ["Bronchiolite sospetta, otite.", "Febbre alta.", "Otite; poi BRONCHIOLITE confermata; e bronchiolite."]
    spans = np.array([[0, 22], [23, 29], [0, 12], [0, 6], [7, 35], [36, 51]])
    doc = np.array([3, 3, 5, 8, 8, 8])  # dataset positions
    scope = SegmentScope(SegmentCodes(np.zeros((6, 4), np.float32), doc, spans), ("bronchiolit",))
    positions = np.array([3, 5, 8])
    assert scope.matching(positions, texts).tolist() == [0, 4, 5]
    assert scope.texts(positions, texts) == ["Bronchiolite sospetta,", "",
                                             "poi BRONCHIOLITE confermata; e bronchiolite."]
    assert scope.texts(positions[1:2], texts[1:2]) == [""]


def test_the_clause_holding_a_mention_on_a_text_with_known_offsets() -> None:
    """E3C gives each event's character offsets in its sentence: the clause that holds the mention is the one the
    product's segmenter cut around those characters, whatever the clause before or after says."""
    from services.embedder.segments import segment_spans

    from gateway.domain.concepts.scope import segments_holding

    texts = ["The patient denied chest pain, but a fever of 39 C was recorded.",
             "No rash. Suspected bronchiolitis in the infant."]
    owner, start, end = segment_spans(texts)
    spans = np.stack([start, end], axis=1)
    pieces = [texts[o][a:b] for o, a, b in zip(owner.tolist(), start.tolist(), end.tolist())]
    fever = texts[0].index("fever")
    bronchiolitis = texts[1].index("bronchiolitis")
    held = segments_holding(owner, spans, [[(fever, fever + 5)], [(bronchiolitis, bronchiolitis + 13)]])
    assert [p for p, h in zip(pieces, held) if h] == [p for p in pieces if "fever" in p or "bronchiolitis" in p]
    assert held.sum() == 2 and not any("chest pain" in p or "rash" in p for p, h in zip(pieces, held) if h)
    across = texts[0].index("pain")  # "pain, but a": ends in the next clause, so both clauses hold it
    both = segments_holding(owner, spans, [[(across, across + 11)], []])
    assert both.sum() == 2 and set(owner[both].tolist()) == {0}
    assert not segments_holding(owner, spans, [[], [(5, 5)]]).any()  # an empty mention is held by none
