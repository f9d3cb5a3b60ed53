"""Naming, however it is sped up, names as it did: the reference corpus's names, scores, thresholds,
precision curves and reasons match naming_fixture/naming_expected.json, written by the code before the speed-ups
(tests/interpreter/naming_reference.py; rewritten since only where neighbours that tie in a float32 product came to
be ordered by their exact dot products: the evidence of 4 of the 96 features, no name); both named in a process
whose arithmetic every x86-64 CPU with AVX2 does alike (naming_reference.PINNED)."""

from __future__ import annotations

import json
import math

import pytest

from tests.interpreter.naming_reference import EXPECTED, name_pinned


def differences(got: object, want: object, path: str = "") -> list[str]:
    """Where two JSON values differ, floats compared to 1e-9 (a sum in another order)."""
    if isinstance(want, float) or isinstance(got, float):
        ok = isinstance(got, (int, float)) and isinstance(want, (int, float)) and math.isclose(got, want, abs_tol=1e-9)
        return [] if ok else [f"{path}: {got!r} != {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if got.keys() != want.keys():
            return [f"{path}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in want for d in differences(got[k], want[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{path}[{i}]")]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


@pytest.mark.parametrize(("ahead", "child"), [(0, False), (2, False), (2, True)])
def test_the_reference_corpus_is_named_as_before(ahead, child):
    """Batch by batch, and with groups of two batches prepared (evidence, candidates, their vectors) ahead, drawn
    in this process or by a child process (services/interpreter/ahead.py) and this one."""
    want = json.loads(EXPECTED.read_text())
    got = name_pinned(ahead, child)
    assert [r["feature"] for r in got] == [r["feature"] for r in want]
    found = differences(got, want)
    assert not found, "\n".join(found[:20])
