"""Parse feature expressions with lark (the grammar is in `grammar.py`) into `ast` nodes.

Every failure is an `ExpressionError` with the 1-based line and column where it occurs and what
would have been accepted there, worded for people (`a number`, `')'`), not lark's terminal names.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lark import Lark, Token, Transformer_NonRecursive, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark import v_args
from lark.exceptions import VisitError
from lark.tree import Meta

from gateway.search import ast
from gateway.search.errors import ExpressionError
from gateway.search.grammar import GRAMMAR

MAX_LENGTH = 10_000  # characters; longer input is refused before parsing
# Checked on lark's tree before anything recursive walks it (a 2,000-deep NOT was a RecursionError).
# A chain of + or AND adds a level per term: 256 still holds a weighted sum of 250 features.
MAX_DEPTH = 256
MAX_NODES = 2_000  # numbers, references and operators

EXPECTED_WORDS = {
    "NUMBER": "a number", "FEATURE": "a feature (F12)", "LABEL": 'label:"…"', "FAMILY": "family:N",
    "ANY": "any(…)", "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "AND": "AND", "OR": "OR", "NOT": "NOT",
    "COMP": "a comparison (> >= < <= =)", "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'",
    "STRING": 'a quoted label ("…")', "INT": "a family number", "$END": "the end of the expression",
    "SEGMENT": "SEGMENT(…)",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False)


@v_args(inline=True, meta=True)
class _ToAst(Transformer_NonRecursive):
    """lark tree → ast nodes; each node keeps the position where its text starts (meta).
    Non-recursive: lark's own Transformer takes two Python frames per level."""

    def number(self, m: Meta, tok: Token) -> ast.Num:
        return ast.Num(m.line, m.column, value=float(tok))

    def feature(self, m: Meta, tok: Token) -> ast.FeatureRef:
        return ast.FeatureRef(m.line, m.column, index=int(tok[1:]))

    def label(self, m: Meta, tok: Token) -> ast.LabelRef:
        return ast.LabelRef(m.line, m.column, label=unquote(tok).strip())

    def family(self, m: Meta, tok: Token) -> ast.FamilyRef:
        return ast.FamilyRef(m.line, m.column, family_id=int(tok))

    def any_(self, m: Meta, *items: ast.Node) -> ast.AnyOf:
        return ast.AnyOf(m.line, m.column, items=tuple(items))

    def add(self, m: Meta, left: ast.Node, op: Token, right: ast.Node) -> ast.Arith:
        return ast.Arith(m.line, m.column, op=str(op), left=left, right=right)

    def mul(self, m: Meta, left: ast.Node, right: ast.Node) -> ast.Arith:
        return ast.Arith(m.line, m.column, op="*", left=left, right=right)

    def neg(self, m: Meta, op: Token, item: ast.Node) -> ast.Neg:
        return ast.Neg(m.line, m.column, item=item)

    def compare(self, m: Meta, left: ast.Node, op: Token, right: ast.Node) -> ast.Compare:
        # positioned at the operator: that is where "compares no feature" is best shown
        return ast.Compare(op.line or m.line, op.column or m.column, op=str(op), left=left, right=right)

    def and_(self, m: Meta, left: ast.Node, right: ast.Node) -> ast.And:
        return ast.And(m.line, m.column, left=left, right=right)

    def or_(self, m: Meta, left: ast.Node, right: ast.Node) -> ast.Or:
        return ast.Or(m.line, m.column, left=left, right=right)

    def not_(self, m: Meta, item: ast.Node) -> ast.Not:
        return ast.Not(m.line, m.column, item=item)

    def segment(self, m: Meta, item: ast.Node) -> ast.Segment:
        return ast.Segment(m.line, m.column, item=item)


def unquote(tok: Token) -> str:
    """A STRING token's text: `\\"` is a quote and `\\\\` a backslash; any other escape is an error at
    its column (Python's literal_eval raised on `\\x` inside lark, a 500)."""
    out, i, body = [], 1, str(tok)
    while i < len(body) - 1:
        char = body[i]
        if char == "\\":
            escaped = body[i + 1]
            if escaped not in ('"', "\\"):
                raise ExpressionError(f"unknown escape '\\{escaped}' in a label: only \\\" and \\\\ are escapes",
                                      line=tok.line or 1, column=(tok.column or 1) + i, expected=[])
            out.append(escaped)
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def check_size(tree: Tree) -> None:
    """At most MAX_NODES nodes and MAX_DEPTH levels, counted without recursion."""
    nodes, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        line, column = getattr(node.meta, "line", 1), getattr(node.meta, "column", 1)
        if depth > MAX_DEPTH:
            raise ExpressionError(f"the expression nests more than {MAX_DEPTH} levels deep (the limit; each NOT, "
                                  "and each term of a chain of + or AND, is a level)", line=line, column=column,
                                  expected=[])
        if nodes > MAX_NODES:
            raise ExpressionError(f"the expression has more than {MAX_NODES} numbers, references and operators "
                                  "(the limit)", line=line, column=column, expected=[])
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))


_SCAN = re.compile(r"""(?P<string>"(?:[^"\\\n]|\\.)*")|(?P<loose>(?i:or|and)\b)|(?P<reset>(?i:not|segment|sentence)\b|>=|<=|[<>=,])
    |(?P<operand>(?i:f[0-9]+\b)|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:label\s*:|family\s*:))
    |(?P<open>\()|(?P<close>\))|(?P<plus>[+-])|(?P<star>\*)|(?P<word>\w+)""", re.VERBOSE)


def check_chains(text: str) -> None:
    """Refuse, before lark builds a tree, a chain of operators too long for MAX_DEPTH. lark makes a
    left-deep node per operator of a chain (`F0+F0+…`, `a AND b AND …`, `x*y*…`) at one level of
    parentheses, and each has a child below it: a run of k such operators is at least k + 1 levels
    deep. Only runs that cannot be split by a looser operator are counted, so this refuses nothing
    check_size would accept; it answers a 3,000-term sum in milliseconds instead of parsing it whole."""
    levels = [{"sum": 0, "star": 0, "and": 0, "or": 0, "after_operand": False}]
    for m in _SCAN.finditer(text):
        kind, level = m.lastgroup, levels[-1]
        if kind == "open":
            levels.append({"sum": 0, "star": 0, "and": 0, "or": 0, "after_operand": False})
            continue
        if kind == "close":
            if len(levels) > 1:
                levels.pop()
            levels[-1]["after_operand"] = True
            continue
        chain = None
        if kind in ("operand", "string", "word"):
            level["after_operand"] = True
            continue
        if kind == "plus" and level["after_operand"]:  # binary + or -; a unary minus is part of its operand
            level["star"], chain = 0, "sum"
        elif kind == "star":
            chain = "star"
        elif kind == "loose":
            op = m.group().lower()
            level["sum"] = level["star"] = 0
            if op == "or":
                level["and"], chain = 0, "or"
            else:
                chain = "and"
        elif kind == "reset":
            level["sum"] = level["star"] = 0
            if m.group() == ",":
                level["and"] = level["or"] = 0
        level["after_operand"] = False
        if chain is not None:
            level[chain] += 1
            if level[chain] + 1 > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
                raise ExpressionError(f"the expression nests more than {MAX_DEPTH} levels deep (the limit; each NOT, "
                                      "and each term of a chain of + or AND, is a level)", line=line, column=column,
                                      expected=[])


def _end_position(text: str) -> tuple[int, int]:
    """(line, column) just past the last non-blank character: where 'more was expected'."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    return line, len(stripped) - (stripped.rfind("\n") + 1) + 1


def _words(names: set[str] | frozenset[str]) -> list[str]:
    return sorted({EXPECTED_WORDS.get(n.lstrip("_"), n.lstrip("_")) for n in names})


def _expected_at(text: str, pos: int, fallback: set[str] | frozenset[str]) -> list[str]:
    """What the grammar accepts after text[:pos]. LALR reduces on the lookahead before failing, so
    lark's own set is often too narrow ('(F1' would expect only ')' and OR): replay the prefix on
    an interactive parser and ask it instead."""
    try:
        ip = _parser().parse_interactive(text[:pos])
        for _ in ip.iter_parse():
            pass
        return _words(ip.accepts())
    except UnexpectedInput:
        return _words(fallback)


def _error_from_lark(text: str, exc: UnexpectedInput) -> ExpressionError:
    if isinstance(exc, UnexpectedCharacters):
        found = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else "?"
        expected = _expected_at(text, exc.pos_in_stream, exc.allowed or set())
        return ExpressionError(f"unexpected character {found!r}", line=exc.line, column=exc.column, expected=expected)
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            line, column = _end_position(text)
            expected = _expected_at(text, len(text), exc.accepts or exc.expected)
            return ExpressionError("the expression ends too early", line=line, column=column, expected=expected)
        expected = _expected_at(text, exc.token.start_pos or 0, exc.accepts or exc.expected)
        return ExpressionError(f"unexpected '{exc.token!s}'", line=exc.line, column=exc.column, expected=expected)
    return ExpressionError(str(exc), line=getattr(exc, "line", 1) or 1, column=getattr(exc, "column", 1) or 1,
                           expected=[])


def parse(text: str) -> ast.Expression:
    """The expression's tree; raises ExpressionError (with line, column and what was expected)."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression is longer than {MAX_LENGTH} characters", line=1, column=MAX_LENGTH + 1,
                              expected=[])
    if not text.strip():
        raise ExpressionError("the expression is empty", line=1, column=1,
                              expected=_words({"FEATURE", "LABEL", "FAMILY", "ANY", "NOT", "NUMBER", "LPAR", "MINUS",
                                                 "SEGMENT"}))
    check_chains(text)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _error_from_lark(text, exc) from None
    check_size(tree)
    try:
        root = _ToAst().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, ExpressionError):
            raise exc.orig_exc from None
        raise
    check_types(root)
    check_scopes(root)
    return ast.Expression(text=text, root=root)


def check_types(node: ast.Node, *, want: str = "condition") -> None:
    """Numbers go where numbers go, conditions where conditions go; a constant is no condition.

    A numeric expression in a condition's place means "> 0" (a bare F12 means F12 fires)."""
    if isinstance(node, ast.CONDITION):
        if want == "number":
            raise ExpressionError("a condition cannot be used as a number here", line=node.line, column=node.column,
                                  expected=["a number", "a feature (F12)"])
        if isinstance(node, ast.Compare) and not (ast.has_reference(node.left) or ast.has_reference(node.right)):
            raise ExpressionError("this comparison involves no feature", line=node.line, column=node.column,
                                  expected=["a feature (F12)", 'label:"…"', "family:N"])
        sub = "number" if isinstance(node, ast.Compare) else "condition"
        for child in ast.children(node):
            check_types(child, want=sub)
        return
    if want == "condition" and not ast.has_reference(node):
        raise ExpressionError("a number alone is not a condition", line=node.line, column=node.column,
                              expected=["a feature (F12)", "a comparison (> >= < <= =)"])
    for child in ast.children(node):
        check_types(child, want="number")


def check_scopes(node: ast.Node, outer: ast.Segment | None = None) -> None:
    """SEGMENT(…) inside SEGMENT(…) has no meaning (a segment has no segments): an error at the inner one."""
    if isinstance(node, ast.Segment):
        if outer is not None:
            raise ExpressionError(f"SEGMENT(…) cannot be nested inside SEGMENT(…) (the outer one is at line "
                                  f"{outer.line}, column {outer.column})", line=node.line, column=node.column,
                                  expected=[])
        outer = node
    for child in ast.children(node):
        check_scopes(child, outer)
