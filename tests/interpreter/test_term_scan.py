"""A corpus read by two processes gives the term index one pass gives: the same vocabulary in the same order, the same
entries, every word's spellings counted and ordered as one pass orders them; and a child that dies is made up for."""

from __future__ import annotations

import os

import numpy as np
import pytest

from services.interpreter.ahead import can_fork
from services.interpreter.backends import term_scan
from services.interpreter.backends.keywords import TermIndex
from services.interpreter.backends.term_scan import scan, scan_corpus

pytestmark = pytest.mark.skipif(not can_fork(), reason="a child process cannot be forked here")

FIRST = ["Bronchiolite da VRS, non febbre.", "Attività respiratoria regolare; sospetta bronchiolite.",
         "L'ospedale dell'infanzia: nessuna febbre", "Dispnea lieve"]
SECOND = ["Attivita respiratoria ridotta, bronchiolite confermata.", "Dispnea lieve",  # a short text seen before
          "Nell'ATTIVITÀ dell'Ospedale un'otite media acuta, poi polmonite lobare " * 12,  # long, new spellings
          "otite media acuta", "Polmonite lobare destra, non versamento pleurico."]


def corpus(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    texts = [*FIRST, *SECOND]
    return [texts[i] if i < len(texts) else texts[int(rng.integers(len(texts)))] + f" nota {i % 7}" for i in range(n)]


def same(a: term_scan.Scan, b: term_scan.Scan) -> None:
    assert list(a.vocab.items()) == list(b.vocab.items()) and a.n == b.n
    # each text's entries (a set of term ids: their order within a text is a set's, read by no one)
    entries = [sorted(zip(s.rows.astype(np.int64).tolist(), s.cols.astype(np.int64).tolist())) for s in (a, b)]
    assert entries[0] == entries[1] and a.rows.astype(np.int64).tolist() == b.rows.astype(np.int64).tolist()
    assert [(w, list(c.items())) for w, c in a.surfaces.items()] == [(w, list(c.items())) for w, c in b.surfaces.items()]


@pytest.mark.parametrize("n", [9, 40])
def test_two_processes_read_what_one_pass_reads(n: int) -> None:
    texts = corpus(n)
    one = scan(texts)
    two = scan_corpus(texts.__getitem__, n, two_processes=True)
    same(two, one)
    # int32 entries both ways: half of int64's memory, and csr_matrix takes them without a copy of its own
    assert {one.rows.dtype, one.cols.dtype, two.rows.dtype, two.cols.dtype} == {np.dtype(np.int32)}
    # the halves meet mid-corpus: terms and spellings first seen in the second half come after the first half's
    assert two.vocab["otite media acuta"] > two.vocab["bronchiolite"]
    assert list(two.surfaces["attivita"]) == ["attività", "attivita"] and two.surfaces["ospedale"]["ospedale"] >= 2
    a, b = TermIndex(texts, min_df=1), TermIndex(scan_corpus(texts.__getitem__, n, two_processes=True), min_df=1)
    assert a.vocab.tolist() == b.vocab.tolist() and (a.matrix != b.matrix).nnz == 0
    assert a.background.tolist() == b.background.tolist() and a.display("attivita") == b.display("attivita")


def test_a_child_that_dies_has_its_half_read_here(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = corpus(30)
    monkeypatch.setattr(term_scan, "_send_half", lambda *args: os._exit(3))  # the forked child runs this
    same(scan_corpus(texts.__getitem__, len(texts), two_processes=True), scan(texts))


def test_the_halves_are_of_about_equal_text() -> None:
    assert term_scan._middle(np.ones(10)) == 5 and term_scan._middle(np.array([1, 1, 1, 100])) == 3
    assert term_scan._middle(np.array([100, 1, 1, 1])) == 1 and term_scan._middle(np.array([5, 5])) == 1
