"""The expression grammar: precedence, every operator, and every error with its position and
what was expected there."""

from __future__ import annotations

import pytest

from gateway.search import ast
from gateway.search.expressions import ExpressionError, parse


def shape(node: ast.Node) -> str:
    """A compact, fully parenthesised rendering of the tree, to compare structures."""
    match node:
        case ast.Num(value=v):
            return f"{v:g}"
        case ast.FeatureRef(index=i):
            return f"F{i}"
        case ast.LabelRef(label=lab):
            return f"label[{lab}]"
        case ast.FamilyRef(family_id=f):
            return f"family[{f}]"
        case ast.AnyOf(items=items):
            return "any(" + ",".join(shape(i) for i in items) + ")"
        case ast.Arith(op=op, left=left, right=right) | ast.Compare(op=op, left=left, right=right):
            return f"({shape(left)} {op} {shape(right)})"
        case ast.Neg(item=item):
            return f"(-{shape(item)})"
        case ast.And(left=left, right=right):
            return f"({shape(left)} AND {shape(right)})"
        case ast.Or(left=left, right=right):
            return f"({shape(left)} OR {shape(right)})"
        case ast.Not(item=item):
            return f"(NOT {shape(item)})"
        case ast.Segment(item=item):
            return f"SEG[{shape(item)}]"
    raise AssertionError(node)


@pytest.mark.parametrize(("text", "tree"), [
    ("F1 OR F2 AND F3", "(F1 OR (F2 AND F3))"),
    ("F1 AND F2 OR F3", "((F1 AND F2) OR F3)"),
    ("NOT F1 AND F2", "((NOT F1) AND F2)"),
    ("NOT F1 OR NOT F2 AND F3", "((NOT F1) OR ((NOT F2) AND F3))"),
    ("NOT NOT F1", "(NOT (NOT F1))"),
    ("NOT F1 > 0.5", "(NOT (F1 > 0.5))"),
    ("(F1 OR F2) AND F3", "((F1 OR F2) AND F3)"),
    ("F1 AND F2 AND F3", "((F1 AND F2) AND F3)"),
    ("F1 + F2 * F3 > 1", "((F1 + (F2 * F3)) > 1)"),
    ("F1 - F2 - F3 < 0", "(((F1 - F2) - F3) < 0)"),
    ("-F1 * 2 <= -1", "(((-F1) * 2) <= (-1))"),
    ("0.7*F12 + 0.3*F40 >= 0.5", "(((0.7 * F12) + (0.3 * F40)) >= 0.5)"),
    ("(F1 + F2) * 0.5 > F3", "(((F1 + F2) * 0.5) > F3)"),
    ("F1 > 0.3 AND NOT F40", "((F1 > 0.3) AND (NOT F40))"),
    ("F1 > 0.3 OR F2 = 0 AND F3 < 1", "((F1 > 0.3) OR ((F2 = 0) AND (F3 < 1)))"),
])
def test_precedence(text: str, tree: str) -> None:
    assert shape(parse(text).root) == tree


@pytest.mark.parametrize(("text", "tree"), [
    ("F12", "F12"),
    ("f12", "F12"),
    ("F0 > 1", "(F0 > 1)"), ("F0 >= 1", "(F0 >= 1)"), ("F0 < 1", "(F0 < 1)"), ("F0 <= 1", "(F0 <= 1)"),
    ("F0 = 0", "(F0 = 0)"),
    ("F1 > F2", "(F1 > F2)"),
    (".5 < F3", "(0.5 < F3)"),
    ("F3 > 1e-2", "(F3 > 0.01)"),
    ("F3 > 2.", "(F3 > 2)"),
    ("f1 and not f2 or F3", "((F1 AND (NOT F2)) OR F3)"),
    ("F1 And F2", "(F1 AND F2)"),
    ('label:"bronchiolitis"', "label[bronchiolitis]"),
    ('LABEL : "  Otitis media "', "label[Otitis media]"),
    (r'label:"the \"so-called\" one"', 'label[the "so-called" one]'),
    ("family:7", "family[7]"),
    ("family : 7 OR F1", "(family[7] OR F1)"),
    ("any(F1, F2, F3)", "any(F1,F2,F3)"),
    ("ANY (F1) >= 0.2", "(any(F1) >= 0.2)"),
    ("any(0.5*F1, family:2, label:\"x\") > 0.1", "(any((0.5 * F1),family[2],label[x]) > 0.1)"),
    ("F1\nAND\n  F2", "(F1 AND F2)"),
])
def test_every_operator(text: str, tree: str) -> None:
    assert shape(parse(text).root) == tree


def test_positions_point_at_the_source() -> None:
    root = parse('F1 AND\n  NOT label:"x"').root
    assert isinstance(root, ast.And) and (root.line, root.column) == (1, 1)
    assert (root.right.line, root.right.column) == (2, 3)
    assert (root.right.item.line, root.right.item.column) == (2, 7)


def test_feature_indices_in_order_of_first_appearance() -> None:
    assert parse("F40 AND (F2 OR F40 > 1) AND NOT F7").feature_indices() == [40, 2, 7]


START = ["'('", "'-'", "a feature (F12)", "a number", "any(…)", "family:N", 'label:"…"']
CONDITION_START = ["NOT", "SEGMENT(…)", *START]


@pytest.mark.parametrize(("text", "line", "column", "message", "expected"), [
    ("", 1, 1, "empty", CONDITION_START),
    ("   ", 1, 1, "empty", CONDITION_START),
    ("F12 >", 1, 6, "ends too early", START),
    ("F1 AND", 1, 7, "ends too early", CONDITION_START),
    ("(F1", 1, 4, "ends too early", ["')'", "'*'", "'+'", "'-'", "AND", "OR", "a comparison (> >= < <= =)"]),
    ("F1 AND\n  (F2 OR", 2, 9, "ends too early", CONDITION_START),
    ("F12 & F3", 1, 5, "unexpected character '&'",
     ["'*'", "'+'", "'-'", "AND", "OR", "a comparison (> >= < <= =)", "the end of the expression"]),
    ("F1 > 0 > 1", 1, 8, "unexpected '>'", ["'*'", "'+'", "'-'", "AND", "OR", "the end of the expression"]),
    ("F1 F2", 1, 4, "unexpected 'F2'",
     ["'*'", "'+'", "'-'", "AND", "OR", "a comparison (> >= < <= =)", "the end of the expression"]),
    ("F1 ANDF2", 1, 4, "unexpected character 'A'",
     ["'*'", "'+'", "'-'", "AND", "OR", "a comparison (> >= < <= =)", "the end of the expression"]),
    ("F1 == 2", 1, 5, "unexpected '='", START),
    ("F1 AND )", 1, 8, "unexpected ')'", CONDITION_START),
    ("label:bron", 1, 7, "unexpected character 'b'", ['a quoted label ("…")']),
    ('label:"open', 1, 7, "unexpected character '\"'", ['a quoted label ("…")']),
    ("family:x", 1, 8, "unexpected character 'x'", ["a family number"]),
    ("family:1.5", 1, 9, "unexpected '.5'",
     ["'*'", "'+'", "'-'", "AND", "OR", "a comparison (> >= < <= =)", "the end of the expression"]),
    ("any()", 1, 5, "unexpected ')'", START),
    ("any(F1 AND F2)", 1, 8, "unexpected 'AND'", ["')'", "'*'", "'+'", "','", "'-'"]),
    ("Fx", 1, 1, "unexpected character 'F'", CONDITION_START),
    ("F1 AND 0.5", 1, 8, "a number alone is not a condition", ["a comparison (> >= < <= =)", "a feature (F12)"]),
    ("2", 1, 1, "a number alone is not a condition", ["a comparison (> >= < <= =)", "a feature (F12)"]),
    ("(F1 AND F2) > 3", 1, 2, "a condition cannot be used as a number", ["a feature (F12)", "a number"]),
    ("any(F1 > 2)", 1, 8, "unexpected '>'", ["')'", "'*'", "'+'", "','", "'-'"]),
    ("1 > 0", 1, 3, "involves no feature", ["a feature (F12)", "family:N", 'label:"…"']),
    ("F1 AND\n  1 + 2 = 3", 2, 9, "involves no feature", ["a feature (F12)", "family:N", 'label:"…"']),
])
def test_errors_say_where_and_what_was_expected(text: str, line: int, column: int, message: str,
                                                 expected: list[str]) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert message in err.message
    assert err.expected == sorted(expected)
    assert f"line {line}, column {column}" in str(err)


def test_overlong_text_is_refused_before_parsing() -> None:
    with pytest.raises(ExpressionError) as info:
        parse("F1 OR " * 2000 + "F1")
    assert "longer than" in info.value.message
