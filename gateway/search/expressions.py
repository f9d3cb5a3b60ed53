"""Feature expressions evaluated over an SAE run's sparse codes. Pure: no FastAPI, no database.

    F12                              F12 fires (activation > 0)
    F12 > 0.3 AND NOT F40            comparisons, AND / OR / NOT (NOT binds tightest, then AND, then OR)
    0.7*F12 + 0.3*F40 >= 0.5         weighted sums
    any(F1, F2, F3) >= 0.2           the largest of several activations
    label:"bronchiolitis"            the feature whose shown label is this (exact, case-insensitive,
                                     else the one label containing it)
    family:7                         any member of family 7 (its largest activation)

Evaluation reads only the referenced columns of the CSC matrix, each as one dense vector of
documents (the docs × n matrix is never densified), so 200,000 documents take milliseconds.
Activations stay float32 (as stored; max is exact in any precision) while sums, products and
comparisons with constants are computed in float64, so that a document on a threshold is decided
exactly as a per-document evaluation in Python would decide it.
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from gateway.search import ast
from gateway.search.ast import Expression
from gateway.search.errors import ExpressionError, FeatureOutOfRange, UnknownFamilyError, UnknownLabelError
from gateway.search.parser import parse

__all__ = [
    "Expression", "ExpressionError", "FeatureOutOfRange", "Match", "SearchSpace", "UnknownFamilyError",
    "UnknownLabelError", "evaluate", "parse", "resolve_label",
]

COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "=": operator.eq,
}
ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}
# Features named by F<n> or label:"…" in one expression; each may become a dense column of documents.
# (A family's members are merged in one sparse pass and do not count.)
MAX_FEATURES = 256


@dataclass
class SearchSpace:
    """What an expression is evaluated against: one SAE run's codes, shown labels and families."""

    codes: sp.csc_matrix  # float32 [docs, n_features]
    labels: Mapping[int, str] = field(default_factory=dict)  # feature index -> shown label
    families: Mapping[int, Sequence[int]] = field(default_factory=dict)  # family id -> member indices

    def __post_init__(self) -> None:
        if not (sp.issparse(self.codes) and self.codes.format == "csc"):
            self.codes = sp.csc_matrix(self.codes)
        self._folded: list[tuple[int, str, str]] | None = None

    @property
    def n_docs(self) -> int:
        return self.codes.shape[0]

    @property
    def n_features(self) -> int:
        return self.codes.shape[1]

    def column(self, index: int) -> np.ndarray:
        """Feature `index`'s activations for every document, float32 [docs] (zeros where it is silent)."""
        codes = self.codes
        start, end = codes.indptr[index], codes.indptr[index + 1]
        out = np.zeros(codes.shape[0], dtype=np.float32)
        out[codes.indices[start:end]] = codes.data[start:end]
        return out

    def largest(self, indices: Sequence[int]) -> np.ndarray:
        """The largest activation among several features for every document, float32 [docs], in one
        pass over their non-zeros (no dense column each)."""
        codes = self.codes
        spans = [(codes.indptr[i], codes.indptr[i + 1]) for i in indices]
        out = np.zeros(codes.shape[0], dtype=np.float32)
        if spans:
            rows = np.concatenate([codes.indices[a:b] for a, b in spans])
            np.maximum.at(out, rows, np.concatenate([codes.data[a:b] for a, b in spans]).astype(np.float32))
        return out

    def folded_labels(self) -> list[tuple[int, str, str]]:
        """(index, label, casefolded label), built once: label lookups scan it."""
        if self._folded is None:
            self._folded = [(i, lab, lab.strip().casefold()) for i, lab in sorted(self.labels.items()) if lab]
        return self._folded


class Match(NamedTuple):
    mask: np.ndarray  # bool [docs]: the documents the expression selects
    score: np.ndarray  # float32 [docs]: see `evaluate`
    features: list[int]  # feature indices the expression refers to, labels and families resolved


def resolve_label(space: SearchSpace, label: str, *, line: int = 1, column: int = 1) -> int:
    """The one feature whose label is `label` (case-insensitive), else the one whose label contains
    it; none or several → UnknownLabelError with the candidates (closest labels when none)."""
    needle = label.strip().casefold()
    folded = space.folded_labels()
    exact = [(i, lab) for i, lab, f in folded if f == needle]
    if len(exact) == 1:
        return exact[0][0]
    if len(exact) > 1:
        raise UnknownLabelError(label, exact, ambiguous=True, line=line, column=column)
    within = [(i, lab) for i, lab, f in folded if needle and needle in f]
    if len(within) == 1:
        return within[0][0]
    if within:
        within.sort(key=lambda c: (len(c[1]), c[0]))  # the tightest labels first
        raise UnknownLabelError(label, within, ambiguous=True, line=line, column=column)
    close = difflib.get_close_matches(needle, [f for _, _, f in folded], n=5, cutoff=0.5)
    candidates = [(i, lab) for c in close for i, lab, f in folded if f == c][:5]
    raise UnknownLabelError(label, candidates, ambiguous=False, line=line, column=column)


def _f64(value: np.ndarray | np.float64) -> np.ndarray | np.float64:
    """Arithmetic in float64: float32 + float32 would round differently from Python floats."""
    return value.astype(np.float64) if isinstance(value, np.ndarray) and value.dtype != np.float64 else value


class _Evaluator:
    """One evaluation: columns are read once each, referenced features collected in order."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.columns: dict[int, np.ndarray] = {}
        self.referenced: dict[int, None] = {}  # feature indices in order of first reference
        self.named: set[int] = set()  # those named by F<n> or label:"…"

    def column(self, index: int, node: ast.Node) -> np.ndarray:
        self.name(index, node)
        if index not in self.columns:
            self.columns[index] = self.space.column(index)
        return self.columns[index]

    def name(self, index: int, node: ast.Node) -> int:
        """`check`, and count the feature against MAX_FEATURES."""
        self.check(index, node)
        self.named.add(index)
        if len(self.named) > MAX_FEATURES:
            raise ExpressionError(f"the expression names more than {MAX_FEATURES} distinct features (the limit)",
                                  line=node.line, column=node.column, expected=[])
        return index

    def reference(self, node: ast.FeatureRef | ast.LabelRef) -> int:
        """The feature index a reference names (a label resolved)."""
        if isinstance(node, ast.FeatureRef):
            return node.index
        return resolve_label(self.space, node.label, line=node.line, column=node.column)

    def check(self, index: int, node: ast.Node) -> int:
        if not 0 <= index < self.space.n_features:
            raise FeatureOutOfRange(index, self.space.n_features, line=node.line, column=node.column)
        self.referenced.setdefault(index, None)
        return index

    def number(self, node: ast.Node) -> np.ndarray | np.float64:
        """[docs] (float32 activations or float64 arithmetic), or a float64 scalar for a constant.
        Constants are NumPy float64 scalars so that comparing a float32 column with them happens in
        float64 (NumPy 2 would cast a plain Python float down to float32)."""
        if isinstance(node, ast.Num):
            return np.float64(node.value)
        if isinstance(node, (ast.FeatureRef, ast.LabelRef)):
            return self.column(self.reference(node), node)
        if isinstance(node, ast.FamilyRef):
            members = self.space.families.get(node.family_id)
            if members is None:
                raise UnknownFamilyError(node.family_id, line=node.line, column=node.column)
            return self.space.largest([self.check(int(i), node) for i in members])
        if isinstance(node, ast.AnyOf):
            return self._any(node)
        if isinstance(node, ast.Arith):
            return ARITH[node.op](_f64(self.number(node.left)), _f64(self.number(node.right)))
        if isinstance(node, ast.Neg):
            return -self.number(node.item)
        raise ExpressionError("a condition cannot be used as a number here", line=node.line, column=node.column,
                              expected=["a number", "a feature (F12)"])

    def _any(self, node: ast.AnyOf) -> np.ndarray:
        """The members that are plain references are merged in one sparse pass (any(F0, …, F200) is one
        dense vector, not 201); the others are evaluated and folded in with np.maximum."""
        indices, values = [], []
        for item in node.items:  # in order, so features are listed and errors found as written
            if isinstance(item, (ast.FeatureRef, ast.LabelRef)):
                indices.append(self.name(self.reference(item), item))
            else:
                values.append(self.number(item))
        if indices:
            values.insert(0, self.space.largest(indices))
        return self._largest(values)

    def _largest(self, values: list[np.ndarray | np.float64]) -> np.ndarray:
        out = values[0]
        for v in values[1:]:
            out = np.maximum(out, v)
        return np.broadcast_to(out, (self.space.n_docs,))

    def condition(self, node: ast.Node) -> tuple[np.ndarray, np.ndarray]:
        """(mask bool [docs], score float64 [docs]) of a condition."""
        n = self.space.n_docs
        if isinstance(node, ast.Compare):
            left, right = self.number(node.left), self.number(node.right)
            mask = np.broadcast_to(COMPARE[node.op](left, right), (n,))
            score = left if ast.has_reference(node.left) else right
            return mask, np.broadcast_to(score, (n,))
        if isinstance(node, (ast.And, ast.Or)):
            lmask, lscore = self.condition(node.left)
            rmask, rscore = self.condition(node.right)
            mask = (lmask & rmask) if isinstance(node, ast.And) else (lmask | rmask)
            return mask, np.maximum(lscore, rscore)
        if isinstance(node, ast.Not):
            mask, _ = self.condition(node.item)
            return ~mask, np.zeros(n, dtype=np.float32)  # a document matched by an absence has no strength to rank by
        value = np.broadcast_to(self.number(node), (n,))  # a number as a condition: "> 0"
        return value > 0, value


def evaluate(text_or_expr: str | Expression, space: SearchSpace) -> Match:
    """Evaluate an expression on every document of `space`.

    `score` ranks the matches: a numeric expression's value (a weighted sum, an activation) for a
    comparison or a bare reference, the larger of the two sides' scores for AND and OR, and 0 under
    NOT. So `F12 > 0.3 AND NOT F40` ranks by F12, `0.7*F12 + 0.3*F40 >= 0.5` by the weighted sum.

    Raises ExpressionError, UnknownLabelError, FeatureOutOfRange, UnknownFamilyError."""
    expr = parse(text_or_expr) if isinstance(text_or_expr, str) else text_or_expr
    ev = _Evaluator(space)
    mask, score = ev.condition(expr.root)
    return Match(mask=np.array(mask, dtype=bool), score=np.asarray(score, dtype=np.float32).copy(),
                 features=list(ev.referenced))
