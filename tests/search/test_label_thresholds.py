"""label:"x" means above the name's calibrated threshold; label search ranks by how well names hold (issue #28)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gateway.search.expressions import SearchSpace, SegmentCodes, evaluate
from gateway.search.label_rank import (
    LabelEntry, expression_from_names, label_matches, notes_selected, rank_labels, search_names,
)
from gateway.search.parser import parse


def space() -> SearchSpace:
    codes = np.array([[0.0, 0.9, 0.0], [0.0, 0.2, 0.5], [0.0, 0.5, 0.0], [0.7, 0.0, 0.0], [0.1, 0.0, 0.3]],
                     dtype=np.float32)
    labels = {0: "bronchiolite", 1: "bronchiolite acuta", 2: "bronchiolite"}
    return SearchSpace(sp.csc_matrix(codes), labels, thresholds={1: 0.5, 0: 0.6}, reliable={0, 1})


def test_a_bare_label_condition_reads_the_threshold_and_a_comparison_reads_the_activation() -> None:
    s = space()
    assert np.flatnonzero(evaluate('label:"bronchiolite acuta"', s).mask).tolist() == [0, 2]  # >= 0.5
    assert np.flatnonzero(evaluate('label:"bronchiolite acuta" > 0', s).mask).tolist() == [0, 1, 2]
    assert np.flatnonzero(evaluate('NOT label:"bronchiolite acuta"', s).mask).tolist() == [1, 3, 4]
    # several features share "bronchiolite": the reliable one (F0), above its threshold 0.6
    assert np.flatnonzero(evaluate('label:"bronchiolite"', s).mask).tolist() == [3]
    assert evaluate('label:"bronchiolite"', s).features == [0]
    assert np.flatnonzero(evaluate("F1", s).mask).tolist() == [0, 1, 2]  # F<n> keeps "> 0"


def test_the_threshold_holds_inside_segment() -> None:
    seg_codes = sp.csc_matrix(np.array([[0.0, 0.4, 0], [0.0, 0.6, 0], [0.0, 0.3, 0]], dtype=np.float32))
    seg = SegmentCodes(seg_codes, np.array([0, 0, 1]), np.array([[0, 5], [6, 9], [0, 4]]))
    s = SearchSpace(sp.csc_matrix(np.array([[0, 0.6, 0], [0, 0.3, 0]], np.float32)), {1: "torace libero"},
                    thresholds={1: 0.5}, segments=seg)
    match = evaluate('SEGMENT(label:"torace libero")', s)
    assert match.mask.tolist() == [True, False] and match.segment.tolist() == [1, -1]


def test_label_search_ranks_reliable_names_by_score_then_specificity_and_counts_notes() -> None:
    codes = sp.csc_matrix(np.array([[0.9, 0.9, 0.4], [0.2, 0.8, 0.0], [0.7, 0.0, 0.6]], dtype=np.float32))
    entries = [LabelEntry(0, "bronchiolite", None, 0.8, True, 0.5),
               LabelEntry(1, "bronchiolite acuta", None, 0.8, True, None),
               LabelEntry(2, "sospetta bronchiolite", None, 0.95, False, 0.5),
               LabelEntry(3, "torace libero", None, 0.99, True, 0.1)]
    assert notes_selected(codes, entries[0]) == 2 and notes_selected(codes, entries[1]) == 2
    assert label_matches("bronchiol", entries[2]) and not label_matches("bronchiolite esclusa", entries[0])
    ranked = search_names("bronchiolite", entries[:3], codes)
    assert [(e.index, n) for e, n in ranked] == [(0, 2), (1, 2), (2, 1)]  # reliable first; ties: fewer notes, index
    assert [e.index for e, _ in rank_labels(entries[:3])] == [0, 1, 2]


def test_quoted_words_match_whole_words_and_whole_words_rank_first() -> None:
    """`no` begins "normal" as it begins "no"; "no" in quotes is the word only, and unquoted the names holding
    it as a word come before those that only begin with it, whatever their scores."""
    from gateway.search.label_rank import query_terms

    entries = [LabelEntry(0, "normal", None, 0.99, True, None), LabelEntry(1, "no rash", None, 0.7, True, None),
               LabelEntry(2, "valve is normal", None, 0.95, True, None), LabelEntry(3, "no", None, 0.6, False, None)]
    assert query_terms('no "rash" nor') == [("no", False), ("rash", True), ("nor", False)]
    assert query_terms('"no rash" x') == [("no", True), ("rash", True), ("x", False)]
    assert query_terms('say "no') == [("say", False), ("no", False)]  # a quote left open quotes nothing
    assert [e.index for e, _ in search_names("no", entries)] == [1, 3, 0, 2]  # words first, then by how names hold
    assert [e.index for e, _ in search_names('"no"', entries)] == [1, 3]
    assert [e.index for e, _ in search_names('"nor"', entries)] == [] and len(search_names("nor", entries)) == 2
    assert label_matches('"rash" no', entries[1]) and not label_matches('"ras"', entries[1])
    assert [e.index for e, _ in rank_labels(entries)] == [0, 2, 1, 3]  # no query: reliability and score alone


def test_names_that_hold_the_query_rank_before_names_found_through_their_evidence() -> None:
    """A name whose keyword evidence (description) holds the query, however well it scores, comes after the names
    that hold it themselves: typing "bron" offers "bronchiolite …" before "torace libero"."""
    entries = [LabelEntry(0, "torace libero", "bronchiolite, torace, libero", 0.99, True, None),
               LabelEntry(1, "sospetta bronchiolite", None, 0.6, True, None),
               LabelEntry(2, "bronchiolite acuta", None, 0.7, False, None),
               LabelEntry(3, "bronchiolite", "bronchiolite, sibili", 0.5, True, None)]
    assert [e.index for e, _ in search_names("bron", entries)] == [1, 3, 2, 0]
    assert [e.index for e, _ in search_names("bronchiolite", entries)] == [1, 3, 2, 0]
    assert [e.index for e, _ in search_names("libero", entries)] == [0]


def test_the_expression_a_user_writes_from_label_searches():
    """What the demo's expression concept and bench/status.py's user write: the topic's names, NOT the cues'
    (a topic name holding a cue word is a cue), in one segment; NegEx's user has no topic word."""
    found = {"bronchiolit": ["bronchiolite", "sospetta bronchiolite", "bronchiolite acuta"],
             "sospett": ["sospetta bronchiolite", 'pls "con" sospetto'], "esclus": [], "?": []}
    expression, topic, cues = expression_from_names(found, ("bronchiolit",), ("sospett", "?", "esclus"))
    assert topic == ["bronchiolite", "bronchiolite acuta"]
    assert cues == ["sospetta bronchiolite", 'pls "con" sospetto']  # each once
    assert expression == ('SEGMENT((label:"bronchiolite" OR label:"bronchiolite acuta") AND NOT '
                          '(label:"sospetta bronchiolite" OR label:"pls \\"con\\" sospetto"))')
    parse(expression)  # the quotes inside a name are escaped as the grammar reads them
    assert expression_from_names({"b": ["b1"]}, ("b",), ("c",), scoped=False)[0] == '(label:"b1")'
    assert expression_from_names({"no": ["no rash"]}, (), ("no",))[0] == 'SEGMENT(NOT (label:"no rash"))'
    assert expression_from_names({"b": []}, ("b",), ("c",))[0] == "SEGMENT(F0 < 0)"  # nothing found: no match
