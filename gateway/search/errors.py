"""What can go wrong with a feature expression, each error carrying what a 4xx answer must say."""

from __future__ import annotations


class ExpressionError(ValueError):
    """The text is not a valid expression: where (1-based line, column) and what was expected there."""

    def __init__(self, message: str, *, line: int, column: int, expected: list[str]) -> None:
        expected = sorted(set(expected))
        super().__init__(f"{message} at line {line}, column {column}"
                         + (f"; expected {', '.join(expected)}" if expected else ""))
        self.message, self.line, self.column, self.expected = message, line, column, expected


class UnknownLabelError(ValueError):
    """`label:"…"` matched no feature, or more than one: `candidates` are (index, label) to choose from."""

    def __init__(self, label: str, candidates: list[tuple[int, str]], *, ambiguous: bool,
                 line: int = 1, column: int = 1) -> None:
        shown = ", ".join(f'F{i} "{lab}"' for i, lab in candidates[:10])
        if ambiguous:
            message = f'label "{label}" matches {len(candidates)} features: {shown}; use one of their labels or F<n>'
        else:
            message = f'no feature has a label matching "{label}"' + (f"; closest: {shown}" if candidates else "")
        super().__init__(message)
        self.label, self.candidates, self.ambiguous = label, candidates, ambiguous
        self.message, self.line, self.column = message, line, column


class FeatureOutOfRange(ValueError):
    """`F<index>` names no feature of this SAE (features are 0..n_features-1)."""

    def __init__(self, index: int, n_features: int, *, line: int = 1, column: int = 1) -> None:
        message = f"feature F{index} is out of range: this SAE has features F0..F{n_features - 1}"
        super().__init__(message)
        self.index, self.n_features, self.message, self.line, self.column = index, n_features, message, line, column


class PlainWords(ExpressionError):
    """Words that are not an expression (`bronchiolite`, `wheezing infant`): what a user typing a name or a
    phrase into the expression box meant is `label:"…"` or a search by text, so the error says so, with the
    features of that name or the closest names as `candidates` ((index, label) pairs)."""

    def __init__(self, words: str, suggestion: str, candidates: list[tuple[int, str]], *, line: int, column: int,
                 expected: list[str]) -> None:
        message = (f"{words!r} is words, not an expression: {suggestion} finds the features of that name; "
                   "to find documents that read like it, search documents like a text")
        super().__init__(message, line=line, column=column, expected=expected)
        self.words, self.suggestion, self.candidates = words, suggestion, candidates


class UnknownFamilyError(ValueError):
    """`family:<id>` names no family of this SAE run."""

    def __init__(self, family_id: int, *, line: int = 1, column: int = 1) -> None:
        message = f"family {family_id} does not exist in this SAE run"
        super().__init__(message)
        self.family_id, self.message, self.line, self.column = family_id, message, line, column


class NoSegmentCodes(ExpressionError):
    """SEGMENT(…) on an SAE run that has no per-segment codes; an ExpressionError so that every caller
    answers it as it answers a wrong expression (a 422 pointing at the SEGMENT)."""

    def __init__(self, *, line: int, column: int) -> None:
        super().__init__("this SAE run has no segment codes: SEGMENT(…) needs an SAE trained with segments",
                         line=line, column=column, expected=[])
