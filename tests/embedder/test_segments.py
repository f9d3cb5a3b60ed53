"""Segments: clauses (the default) or sentences with exact character spans; abbreviations and
decimals do not end one, newlines do, long unpunctuated text is windowed."""

from __future__ import annotations

import pytest

from services.embedder.segments import Span, split_segments


def pieces(text: str, **kw: int | str) -> list[str]:
    spans = split_segments(text, **kw)
    for span in spans:
        piece = text[span.start:span.end]
        assert piece == piece.strip() and piece, "spans are trimmed and never empty"
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:])), "in order, not overlapping"
    return [text[s.start:s.end] for s in spans]


def test_italian_note_sentences_and_lines() -> None:
    text = ("Motivo: tosse da 3 giorni. Sospetta bronchiolite.\n"
            "EO: Pz. vigile, TC 37,5 °C (es. ascellare), SatO2 95% ecc. MV ridotto.\n\n"
            "Conclusioni:\nBronchiolite acuta. Visto dal Dott. Rossi e dalla Dr.ssa Bianchi, p.es. per RSV.")
    assert pieces(text, unit="sentence") == [
        "Motivo: tosse da 3 giorni.", "Sospetta bronchiolite.",
        "EO: Pz. vigile, TC 37,5 °C (es. ascellare), SatO2 95% ecc. MV ridotto.",
        "Conclusioni:", "Bronchiolite acuta.", "Visto dal Dott. Rossi e dalla Dr.ssa Bianchi, p.es. per RSV.",
    ]


def test_english_abbreviations_decimals_and_initials() -> None:
    text = ("Seen by Dr. Smith vs. Dr. Jones, e.g. for fever, i.e. 38.5 °C. J. K. Brown agreed. "
            "Tolerated some p.o. fluids. No EDEMA! Is it CROUP? Likely.")
    assert pieces(text, unit="sentence") == [
        "Seen by Dr. Smith vs. Dr. Jones, e.g. for fever, i.e. 38.5 °C.", "J. K. Brown agreed.",
        "Tolerated some p.o. fluids.", "No EDEMA!", "Is it CROUP?", "Likely.",
    ]


def test_a_decimal_at_the_end_of_a_sentence_still_ends_it() -> None:
    assert pieces("TC 38.5. Nessun farmaco.") == ["TC 38.5.", "Nessun farmaco."]


def test_clauses_end_at_commas_semicolons_and_before_contrast_words() -> None:
    text = ("Motivo: tosse, TC 37,5 °C alle 10:30 (es. ascellare). Sospetta bronchiolite, esclusa polmonite ma "
            "presente otite; rivalutare.\nNo [EDEMA], but has fever. Fever however mild, except at night.")
    assert pieces(text) == [
        "Motivo:", "tosse,", "TC 37,5 °C alle 10:30 (es. ascellare).",  # a decimal comma and a time do not cut
        "Sospetta bronchiolite,", "esclusa polmonite", "ma presente otite;", "rivalutare.",
        "No [EDEMA],", "but has fever.", "Fever", "however mild,", "except at night.",
    ]
    # every clause lies inside one sentence: the sentence unit keeps them together
    assert pieces(text, unit="sentence")[1] == "Sospetta bronchiolite, esclusa polmonite ma presente otite; rivalutare."


def test_contrast_words_cut_only_as_whole_words() -> None:
    # "ma" in "Mamma" / "mai", "but" in "button", "yet" at the start: no cut
    assert pieces("Mamma riferisce tosse mai trattata. Yet another button pressed.") == [
        "Mamma riferisce tosse mai trattata.", "Yet another button pressed."]


def test_unknown_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="unit"):
        split_segments("a b", unit="paragraph")


def test_question_mark_inside_a_word_and_lower_case_continuations_do_not_split() -> None:
    assert pieces('Richiesta del PLS: "?bronchiolite". Diagnosi: bronchiolite? da confermare.', unit="sentence") == [
        'Richiesta del PLS: "?bronchiolite".', "Diagnosi: bronchiolite? da confermare."]


def test_long_unpunctuated_text_is_windowed_evenly() -> None:
    words = [f"parola{i}" for i in range(250)]
    text = " ".join(words)
    got = pieces(text, max_words=100)
    assert len(got) == 3  # ceil(250 / 100), sizes 83/84/83
    assert [len(p.split()) for p in got] == [83, 84, 83]
    assert " ".join(got) == text


def test_spans_index_the_original_text_with_crlf_and_indentation() -> None:
    text = "  Anamnesi:\r\n\tNon allergie note.  Vaccinato.\r\n"
    spans = split_segments(text)
    assert [text[s.start:s.end] for s in spans] == ["Anamnesi:", "Non allergie note.", "Vaccinato."]
    assert spans[0] == Span(2, 11)


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_empty_and_white_space_texts_have_no_segments(text: str) -> None:
    assert split_segments(text) == []


def test_max_words_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_words"):
        split_segments("a b", max_words=0)


def test_the_word_before_a_period_is_the_anchored_pattern_s_word() -> None:
    """The backward scan gives what `[(\\[\"'«]*([^\\s(\\[\"'«]*)$` searched up to the period gave
    (the pattern it replaced, which tried every start of the line), on random lines with brackets,
    quotes and Unicode white space."""
    import random
    import re

    from services.embedder.segments import _word_before

    pattern = re.compile(r"[(\[\"'«]*([^\s(\[\"'«]*)$")
    rng = random.Random(0)
    alphabet = [*"ab.X(", "[", '"', "'", "«", "»", " ", "\t", "\u00a0", "\u2009", "\x1c", "è", "E.O", "p.o"]
    checked = 0
    for _ in range(3000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        for end in range(len(line) + 1):
            assert _word_before(line, end) == pattern.search(line, 0, end).group(1), (line, end)
            checked += 1
    assert checked > 50_000


def test_long_lines_of_many_sentences_and_abbreviations_keep_every_boundary() -> None:
    sentence = "Pz. con febbre a 38.5 dal Dr. Rossi, ma E.O. nella norma. "
    text = sentence * 2000  # one line of 2,000 sentences
    got = pieces(text, unit="sentence")
    assert got == [sentence.strip()] * 2000
