"""Feature expressions evaluated over an SAE run's sparse codes. Pure: no FastAPI, no database.

    F12                              F12 fires (activation > 0)
    F12 > 0.3 AND NOT F40            comparisons, AND / OR / NOT (NOT binds tightest, then AND, then OR)
    0.7*F12 + 0.3*F40 >= 0.5         weighted sums
    any(F1, F2, F3) >= 0.2           the largest of several activations
    label:"bronchiolitis"            the features whose shown label is this (exact, case-insensitive;
                                     several: their largest activation), else the one label containing it;
                                     as a condition: above the name's calibrated threshold (where it holds
                                     with precision >= 0.8), `label:"x" > 0` for any activation
    family:7                         any member of family 7 (its largest activation)
    SEGMENT(F1 AND NOT F2)           in one segment (clause or sentence) of the document: F1 and not F2 there

Evaluation reads only the referenced columns of the CSC matrix, each as one dense vector of
documents (the docs × n matrix is never densified), so 200,000 documents take milliseconds.
Activations stay float32 (as stored; max is exact in any precision) while sums, products and
comparisons with constants are computed in float64, so that a document on a threshold is decided
exactly as a per-document evaluation in Python would decide it.

SEGMENT(…) evaluates its condition the same way over the rows of the run's segment codes, then
reduces to documents: a document matches when one of its segments does, scores the best matching
segment's score, and remembers that segment (to show where it matched).
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from gateway.search import ast
from gateway.search.ast import Expression
from gateway.search.errors import (
    ExpressionError, FeatureOutOfRange, NoSegmentCodes, PlainWords, UnknownFamilyError, UnknownLabelError,
)
from gateway.search.label_rank import quoted_label, selected
from gateway.search.parser import parse

__all__ = [
    "Expression", "ExpressionError", "FeatureOutOfRange", "Match", "NoSegmentCodes", "PlainWords", "SearchSpace",
    "SegmentCodes", "UnknownFamilyError", "UnknownLabelError", "evaluate", "label_matches", "parse", "parse_in",
    "resolve_labels",
]

COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "=": operator.eq,
}
ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}
# Features named by F<n> or label:"…" in one expression; each may become a dense column of documents.
# (A family's members are merged in one sparse pass and do not count.)
MAX_FEATURES = 256


@dataclass
class SegmentCodes:
    """A run's documents cut into segments (clauses or sentences), each encoded alone; SEGMENT(…) reads these."""

    codes: sp.csc_matrix  # float32 [segments, n_features]
    doc: np.ndarray  # int64 [segments]: each segment's document position; a document's segments contiguous, in order
    spans: np.ndarray  # int64 [segments, 2]: each segment's (start, end) characters in its document's text

    def __post_init__(self) -> None:
        if not (sp.issparse(self.codes) and self.codes.format == "csc"):
            self.codes = sp.csc_matrix(self.codes)
        self.doc = np.asarray(self.doc, dtype=np.int64)
        self.spans = np.asarray(self.spans, dtype=np.int64).reshape(-1, 2)
        n = self.codes.shape[0]
        if self.doc.shape != (n,) or self.spans.shape != (n, 2):
            raise ValueError(f"{n} segment code rows but segment_doc {self.doc.shape}, spans {self.spans.shape}")
        if n and (self.doc[0] < 0 or np.any(np.diff(self.doc) < 0)):
            raise ValueError("segment_doc must be non-negative and non-decreasing (a document's segments together)")


@dataclass
class SearchSpace:
    """What an expression is evaluated against: one SAE run's codes, shown labels and families, and
    its segment codes when the SAE was run on segments (None otherwise: SEGMENT(…) is then an error)."""

    codes: sp.csc_matrix  # float32 [docs, n_features]
    labels: Mapping[int, str] = field(default_factory=dict)  # feature index -> shown label
    families: Mapping[int, Sequence[int]] = field(default_factory=dict)  # family id -> member indices
    # the segment codes, or a function loading them on first use (they are several times the
    # document codes, and only SEGMENT reads them); None: the run has none
    segments: SegmentCodes | Callable[[], SegmentCodes] | None = None
    # feature index -> its shown name's calibrated threshold: a bare label:"…" condition means activation >= it
    thresholds: Mapping[int, float] = field(default_factory=dict)
    # features whose shown name is reliable: label:"x" reads only those of them where any is named "x"
    reliable: Collection[int] = frozenset()

    def __post_init__(self) -> None:
        if not (sp.issparse(self.codes) and self.codes.format == "csc"):
            self.codes = sp.csc_matrix(self.codes)
        self._folded: list[tuple[int, str, str]] | None = None
        self._scoped: SearchSpace | None = None
        if isinstance(self.segments, SegmentCodes):
            self._check_segments(self.segments)

    def _check_segments(self, seg: SegmentCodes) -> None:
        if seg.codes.shape[1] != self.n_features or np.any(seg.doc >= self.n_docs):
            raise ValueError(f"segment codes {seg.codes.shape} do not fit document codes {self.codes.shape}")

    def segment_codes(self) -> SegmentCodes | None:
        """The segment codes (loaded now if given as a loader), or None when the run has none."""
        if self.segments is not None and not isinstance(self.segments, SegmentCodes):
            loaded = self.segments()
            self._check_segments(loaded)
            self.segments = loaded
        return self.segments

    def segment_space(self) -> SearchSpace | None:
        """The same features, labels and families with segments for rows (built once), or None."""
        segments = self.segment_codes()
        if segments is not None and self._scoped is None:
            self._scoped = SearchSpace(segments.codes, self.labels, self.families, thresholds=self.thresholds,
                                       reliable=self.reliable)
        return self._scoped

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
    # int64 [docs]: the segment (row of the segment codes) a match came through, -1 where none;
    # None when no SEGMENT(…) can point at one
    segment: np.ndarray | None = None


class _Condition(NamedTuple):
    mask: np.ndarray  # bool [rows]
    score: np.ndarray  # float [rows]
    segment: np.ndarray | None  # int64 [rows]: a matching segment (-1: none), only where mask; None without SEGMENT


def label_matches(space: SearchSpace, label: str) -> tuple[str, list[tuple[int, str]]]:
    """The features `label` could name, as (how, [(index, label)]): "exact" (its namesakes, case-insensitive,
    reliable ones first), else "within" (the labels containing it, the tightest first), else "close" (the
    closest labels, difflib, at most 5; none when nothing is close)."""
    needle = label.strip().casefold()
    folded = space.folded_labels()
    exact = [(i, lab) for i, lab, f in folded if f == needle]
    if exact:
        return "exact", sorted(exact, key=lambda c: (c[0] not in space.reliable, c[0]))
    within = sorted(((i, lab) for i, lab, f in folded if needle and needle in f), key=lambda c: (len(c[1]), c[0]))
    if within:
        return "within", within
    close = difflib.get_close_matches(needle, [f for _, _, f in folded], n=5, cutoff=0.5)
    return "close", [(i, lab) for c in close for i, lab, f in folded if f == c][:5]


def resolve_labels(space: SearchSpace, label: str, *, line: int = 1, column: int = 1) -> list[int]:
    """The features whose label is `label` (case-insensitive; every one of them: several features may
    share a name, as three "bronchiolite" do in the demo, and `label:` then reads their largest
    activation, as `family:` does), else the one feature whose label contains it; several containing
    it or none → UnknownLabelError with the candidates (the closest labels when none)."""
    how, found = label_matches(space, label)
    if how == "exact":  # one meaning per name among reliable features: an unreliable namesake is not what it means
        return [i for i, _ in found if i in space.reliable] or [i for i, _ in found]
    if how == "within" and len(found) == 1:
        return [found[0][0]]
    raise UnknownLabelError(label, found, ambiguous=how == "within", line=line, column=column)


#: Letters first, then letters, digits, spaces, hyphens and apostrophes: a name or a phrase, not an expression
#: (an expression starts with F<n>, label:, family:, any(, SEGMENT(, NOT, a number, a sign or a parenthesis).
_WORDS = re.compile(r"[^\W\d_][\w'’ -]{0,199}")
_KEYWORDS = re.compile(r"\b(?:and|or|not)\b", re.IGNORECASE)


def parse_in(text: str, space: SearchSpace) -> Expression:
    """`parse`, except that plain words (`bronchiolite`) are a PlainWords error suggesting `label:"…"`, with the
    features of that name or the closest names: what a user who typed a name into the expression box meant."""
    try:
        return parse(text)
    except ExpressionError as exc:
        words, first = " ".join(text.split()), len(text) - len(text.lstrip())
        at_first = (exc.line, exc.column) == (text.count("\n", 0, first) + 1, first - text.rfind("\n", 0, first))
        if not (at_first and _WORDS.fullmatch(words)) or _KEYWORDS.search(words):  # F1 fever: F1 is an expression
            raise
        _, candidates = label_matches(space, words)
        raise PlainWords(words, quoted_label(words), candidates[:10], line=exc.line, column=exc.column,
                         expected=exc.expected) from None


def _f64(value: np.ndarray | np.float64) -> np.ndarray | np.float64:
    """Arithmetic in float64: float32 + float32 would round differently from Python floats."""
    return value.astype(np.float64) if isinstance(value, np.ndarray) and value.dtype != np.float64 else value


class _Evaluator:
    """One evaluation: columns are read once each, referenced features collected in order. Inside
    SEGMENT(…) (`scope`) a second evaluator reads the segment space, sharing `referenced`."""

    def __init__(self, space: SearchSpace, referenced: dict[int, None] | None = None,
                 scope: ast.Segment | None = None, named: set[int] | None = None) -> None:
        self.space, self.scope = space, scope
        self.columns: dict[int, np.ndarray] = {}
        self.referenced: dict[int, None] = {} if referenced is None else referenced  # in order of first reference
        self.named: set[int] = set() if named is None else named  # those named by F<n> or label:"…"

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

    def references(self, node: ast.FeatureRef | ast.LabelRef) -> list[int]:
        """The feature indices a reference names (a label resolved: one or several features)."""
        if isinstance(node, ast.FeatureRef):
            return [node.index]
        return resolve_labels(self.space, node.label, line=node.line, column=node.column)

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
            indices = self.references(node)
            if len(indices) == 1:
                return self.column(indices[0], node)
            return self.space.largest([self.name(i, node) for i in indices])
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
                indices.extend(self.name(i, item) for i in self.references(item))
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

    def condition(self, node: ast.Node) -> _Condition:
        """Mask bool [rows], score float [rows] and matching segment of a condition (rows: the space's)."""
        n = self.space.n_docs
        if isinstance(node, ast.Compare):
            left, right = self.number(node.left), self.number(node.right)
            mask = np.broadcast_to(COMPARE[node.op](left, right), (n,))
            score = left if ast.has_reference(node.left) else right
            return _Condition(mask, np.broadcast_to(score, (n,)), None)
        if isinstance(node, (ast.And, ast.Or)):
            left, right = self.condition(node.left), self.condition(node.right)
            mask = (left.mask & right.mask) if isinstance(node, ast.And) else (left.mask | right.mask)
            return _Condition(mask, np.maximum(left.score, right.score), _either_segment(left, right, mask))
        if isinstance(node, ast.Not):
            mask = self.condition(node.item).mask
            # a document matched by an absence has no strength to rank by, nor a segment to show
            return _Condition(~mask, np.zeros(n, dtype=np.float32), None)
        if isinstance(node, ast.Segment):
            return self.segment(node)
        if isinstance(node, ast.LabelRef):
            return self.label_condition(node)
        value = np.broadcast_to(self.number(node), (n,))  # a number as a condition: "> 0"
        return _Condition(value > 0, value, None)

    def label_condition(self, node: ast.LabelRef) -> _Condition:
        """label:"x" as a condition: some feature of that name at or above its calibrated threshold (> 0 where
        it has none); scored by the largest activation, as label:"x" reads as a number."""
        n = self.space.n_docs
        mask = np.zeros(n, dtype=bool)
        score = np.zeros(n, dtype=np.float32)
        for index in self.references(node):
            column = self.column(index, node)
            mask |= selected(column, self.space.thresholds.get(index))
            np.maximum(score, column, out=score)
        return _Condition(mask, score, None)

    def segment(self, node: ast.Segment) -> _Condition:
        """SEGMENT(c): c on every segment, then per document its best-scoring matching segment
        (the earliest among equals): that segment's score, and its index; score 0 where none matches."""
        if self.scope is not None:  # parse() refuses this already; a tree built by hand may not
            raise ExpressionError("SEGMENT(…) cannot be nested inside SEGMENT(…)", line=node.line,
                                  column=node.column, expected=[])
        segments, scoped = self.space.segment_codes(), self.space.segment_space()
        if segments is None or scoped is None:
            raise NoSegmentCodes(line=node.line, column=node.column)
        inner = _Evaluator(scoped, self.referenced, scope=node, named=self.named).condition(node.item)
        hits = np.flatnonzero(inner.mask)  # matching segments, ascending
        docs, scores = segments.doc[hits], np.asarray(inner.score)[hits].astype(np.float64)
        order = np.lexsort((hits, -scores, docs))  # by document, then best score, then earliest
        best = order[np.r_[True, docs[order][1:] != docs[order][:-1]]] if len(order) else order
        n = self.space.n_docs
        mask, score, segment = np.zeros(n, dtype=bool), np.zeros(n), np.full(n, -1, dtype=np.int64)
        mask[docs[best]], score[docs[best]], segment[docs[best]] = True, scores[best], hits[best]
        return _Condition(mask, score, segment)


def _either_segment(left: _Condition, right: _Condition, mask: np.ndarray) -> np.ndarray | None:
    """Under AND / OR: the segment of the side that matched through one, the higher-scoring side
    when both did (the left on ties); kept only where the whole condition matches."""
    if left.segment is None and right.segment is None:
        return None
    if left.segment is None or right.segment is None:
        segment = left.segment if right.segment is None else right.segment
    else:
        take_left = (left.segment >= 0) & ((right.segment < 0) | (left.score >= right.score))
        segment = np.where(take_left, left.segment, right.segment)
    return np.where(mask, segment, -1)


def evaluate(text_or_expr: str | Expression, space: SearchSpace) -> Match:
    """Evaluate an expression on every document of `space`.

    `score` ranks the matches: a numeric expression's value (a weighted sum, an activation) for a
    comparison or a bare reference, the larger of the two sides' scores for AND and OR, and 0 under
    NOT. So `F12 > 0.3 AND NOT F40` ranks by F12, `0.7*F12 + 0.3*F40 >= 0.5` by the weighted sum.
    SEGMENT(c) scores the best of c's scores over the document's segments that satisfy c, and
    `segment` names that segment (under AND / OR, the higher-scoring SEGMENT's; none under NOT).

    Raises ExpressionError (NoSegmentCodes: SEGMENT on a run without segment codes; PlainWords: words, not
    an expression),
    UnknownLabelError, FeatureOutOfRange, UnknownFamilyError."""
    expr = parse_in(text_or_expr, space) if isinstance(text_or_expr, str) else text_or_expr
    ev = _Evaluator(space)
    mask, score, segment = ev.condition(expr.root)
    return Match(mask=np.array(mask, dtype=bool), score=np.asarray(score, dtype=np.float32).copy(),
                 features=list(ev.referenced), segment=None if segment is None else np.array(segment, dtype=np.int64))
