"""The pre-parse chain check refuses a chain of operators too long for the depth limit before lark
builds its tree, and never refuses what the full check (lark's tree, `check_size`) accepts."""

from __future__ import annotations

import pytest

from gateway.search.errors import ExpressionError
from gateway.search.parser import MAX_DEPTH, _parser, check_chains, check_size, parse

SHAPES = [
    lambda n: "+".join(["0.5*F1"] * n), lambda n: " AND ".join(["F1>0"] * n), lambda n: " or ".join(["F2"] * n),
    lambda n: "*".join(["F3"] * n), lambda n: "-".join(["F1"] * n), lambda n: " AND ".join(["NOT F1"] * n),
    lambda n: "(" + "+".join(["F1"] * n) + ") > 1", lambda n: "any(" + ",".join(["F1+F2"] * min(n, 200)) + ")",
    lambda n: " AND ".join(["(F1+F2 > 1 OR F3)"] * n), lambda n: "+".join(["-F1"] * n),
    lambda n: 'label:"a+b+c" + ' + "+".join(["F1"] * n), lambda n: " + ".join(["(F1*F2)"] * n),
    lambda n: " AND ".join(["F1 + F2 + F3"] * n), lambda n: "SEGMENT(" + " AND ".join(["F1"] * n) + ")",
    lambda n: "\n+ ".join(["1e-3*F1"] * n), lambda n: " AND ".join(["label:\"x AND y\""] * n),
]


def accepted_by_tree(text: str) -> bool:
    try:
        check_size(_parser().parse(text))
    except ExpressionError:
        return False
    return True


@pytest.mark.parametrize("n", [2, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 3 * MAX_DEPTH])
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_never_refuses_what_the_tree_check_accepts(shape: int, n: int) -> None:
    text = SHAPES[shape](n)
    if accepted_by_tree(text):
        check_chains(text)  # no exception


def test_a_long_sum_is_refused_at_its_operator() -> None:
    with pytest.raises(ExpressionError, match=f"more than {MAX_DEPTH} levels") as info:
        parse("+".join(["F0"] * 3000))
    assert (info.value.line, info.value.column) == (1, 3 * MAX_DEPTH)  # the 256th '+'
    with pytest.raises(ExpressionError, match="levels") as info:
        parse("F1 > 0 OR\n" + " AND ".join(["F2"] * 400))
    assert info.value.line == 2
    parse("+".join(["0.5*F1"] * 250) + " > 1")  # a weighted sum of 250 features still parses
