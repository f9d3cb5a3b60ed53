"""Vectorised evaluation against a naive per-document evaluation of the same tree, on random
sparse codes and many random expressions; label and family resolution; the typed errors."""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.search import ast
from gateway.search.expressions import (
    FeatureOutOfRange, SearchSpace, UnknownFamilyError, UnknownLabelError, evaluate, parse, resolve_labels,
)

N_DOCS, N_FEATURES, K = 400, 24, 4
LABELS = {0: "Bronchiolitis", 1: "suspected bronchiolitis", 2: "otitis media", 3: "fever", 5: "Fever of unknown origin",
          7: "wheezing", 9: "cough", 11: "Cough"}  # F9 and F11 share a name
FAMILIES = {0: [0, 1, 7], 1: [2], 2: [3, 5, 9, 11], 3: []}


def random_codes(seed: int) -> sp.csc_matrix:
    """k active features per document; activations on a 1/8 grid so that thresholds and `=` get hit."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(N_DOCS), K)
    cols = np.concatenate([rng.choice(N_FEATURES, K, replace=False) for _ in range(N_DOCS)])
    vals = rng.integers(1, 17, N_DOCS * K).astype(np.float32) / 8
    return sp.csr_matrix((vals, (rows, cols)), shape=(N_DOCS, N_FEATURES)).tocsc()


def naive(node: ast.Node, acts: dict[int, float], space: SearchSpace) -> tuple[bool, float] | float:
    """The meaning of a node for one document, in plain Python."""
    if isinstance(node, ast.Num):
        return node.value
    if isinstance(node, ast.FeatureRef):
        return acts.get(node.index, 0.0)
    if isinstance(node, ast.LabelRef):
        return max(acts.get(i, 0.0) for i in resolve_labels(space, node.label))
    if isinstance(node, ast.FamilyRef):
        return max((acts.get(i, 0.0) for i in space.families[node.family_id]), default=0.0)
    if isinstance(node, ast.AnyOf):
        return max(naive(i, acts, space) for i in node.items)
    if isinstance(node, ast.Arith):
        a, b = naive(node.left, acts, space), naive(node.right, acts, space)
        return a + b if node.op == "+" else a - b if node.op == "-" else a * b
    if isinstance(node, ast.Neg):
        return -naive(node.item, acts, space)
    return naive_condition(node, acts, space)


def naive_condition(node: ast.Node, acts: dict[int, float], space: SearchSpace) -> tuple[bool, float]:
    if isinstance(node, ast.Compare):
        a, b = naive(node.left, acts, space), naive(node.right, acts, space)
        hit = {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b, "=": a == b}[node.op]
        return hit, (a if ast.has_reference(node.left) else b)
    if isinstance(node, (ast.And, ast.Or)):
        (m1, s1), (m2, s2) = naive_condition(node.left, acts, space), naive_condition(node.right, acts, space)
        return (m1 and m2) if isinstance(node, ast.And) else (m1 or m2), max(s1, s2)
    if isinstance(node, ast.Not):
        return not naive_condition(node.item, acts, space)[0], 0.0
    value = naive(node, acts, space)
    return value > 0, value


class RandomExpressions:
    """Random well-typed expression texts, with random spacing and keyword case."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def kw(self, word: str) -> str:
        return self.r.choice([word, word.lower(), word.capitalize()])

    def ref(self) -> str:
        choice = self.r.random()
        if choice < 0.6:
            return f"F{self.r.randrange(N_FEATURES)}"
        if choice < 0.8:
            return f'label:"{self.r.choice(["bronchiolitis", "SUSPECTED", "otitis", "wheez", "cough", "unknown origin"])}"'
        return f"family:{self.r.choice(list(FAMILIES))}"

    def number(self, depth: int) -> str:
        c = self.r.random()
        if depth <= 0 or c < 0.4:
            return self.ref()
        if c < 0.55:
            return f"{self.r.choice([0.5, 0.25, 2, 1.5, 0.7])}*{self.ref()}"
        if c < 0.7:
            return f"{self.number(depth - 1)} {self.r.choice('+-')} {self.number(depth - 1)}"
        if c < 0.8:
            return f"-{self.ref()}"
        if c < 0.9:
            return f"{self.kw('ANY')}(" + ", ".join(self.number(depth - 1) for _ in range(self.r.randint(1, 3))) + ")"
        return f"({self.number(depth - 1)})"

    def condition(self, depth: int) -> str:
        c = self.r.random()
        if depth <= 0 or c < 0.25:
            if self.r.random() < 0.3:
                return self.number(1)
            const = self.r.choice(["0", "0.5", "1", "1.25", "2", "-0.5"])
            op = self.r.choice([">", ">=", "<", "<=", "="])
            return f"{self.number(1)} {op} {const}" if self.r.random() < 0.8 else f"{const} {op} {self.number(1)}"
        if c < 0.5:
            return f"{self.condition(depth - 1)} {self.kw('AND')} {self.condition(depth - 1)}"
        if c < 0.75:
            return f"{self.condition(depth - 1)}\n{self.kw('OR')} {self.condition(depth - 1)}"
        if c < 0.9:
            return f"{self.kw('NOT')} {self.condition(depth - 1)}"
        return f"( {self.condition(depth - 1)} )"


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_equals_naive_on_random_expressions(seed: int) -> None:
    space = SearchSpace(random_codes(seed), LABELS, FAMILIES)
    rows = space.codes.tocsr()
    docs = [dict(zip(rows.indices[rows.indptr[d]:rows.indptr[d + 1]].tolist(),
                     rows.data[rows.indptr[d]:rows.indptr[d + 1]].astype(np.float64).tolist())) for d in range(N_DOCS)]
    gen = RandomExpressions(seed)
    for _ in range(60):
        text = gen.condition(3)
        try:
            expr = parse(text)
        except Exception as exc:  # every generated text is valid: a failure here is a grammar bug
            raise AssertionError(f"{text!r}: {exc}") from exc
        try:
            match = evaluate(expr, space)
        except UnknownLabelError:
            with pytest.raises(UnknownLabelError):
                [naive_condition(expr.root, acts, space) for acts in docs]
            continue
        expected = [naive_condition(expr.root, acts, space) for acts in docs]
        want_mask = np.array([m for m, _ in expected])
        want_score = np.array([s for _, s in expected], dtype=np.float32)
        assert match.mask.dtype == bool and match.mask.shape == (N_DOCS,)
        np.testing.assert_array_equal(match.mask, want_mask, err_msg=text)
        np.testing.assert_array_equal(match.score, want_score, err_msg=text)


def test_the_brief_examples_on_a_hand_made_case() -> None:
    # docs: 0 = F0 strong, 1 = F0 weak with F1, 2 = F1 only, 3 = nothing, 4 = F0 and F40-like F2
    dense = np.array([[0.9, 0, 0], [0.2, 0.5, 0], [0, 0.8, 0], [0, 0, 0], [0.6, 0, 0.4]], dtype=np.float32)
    space = SearchSpace(sp.csc_matrix(dense), {0: "bronchiolitis", 1: "suspected bronchiolitis", 2: "wheezing"},
                        {4: [1, 2]})
    assert evaluate("F0", space).mask.tolist() == [True, True, False, False, True]
    assert evaluate("F0 > 0.3 AND NOT F2", space).mask.tolist() == [True, False, False, False, False]
    m = evaluate("0.7*F0 + 0.3*F2 >= 0.5", space)
    assert m.mask.tolist() == [True, False, False, False, True]
    np.testing.assert_allclose(m.score, [0.63, 0.14, 0, 0, 0.54], rtol=1e-6)
    confirmed = evaluate('label:"bronchiolitis" AND NOT label:"suspected"', space)
    assert confirmed.mask.tolist() == [True, False, False, False, True] and confirmed.features == [0, 1]
    assert evaluate("any(F1, F2) >= 0.5", space).mask.tolist() == [False, True, True, False, False]
    assert evaluate("family:4", space).features == [1, 2]
    assert evaluate("F0 = 0", space).mask.tolist() == [False, False, True, True, False]
    assert evaluate("NOT F0", space).score.tolist() == [0] * 5


def test_labels_resolve_exactly_then_by_unique_substring() -> None:
    space = SearchSpace(random_codes(0), LABELS, FAMILIES)
    assert resolve_labels(space, "bronchiolitis") == [0]  # exact (case-insensitive) beats the longer label
    assert resolve_labels(space, "  FEVER ") == [3]
    assert resolve_labels(space, "unknown origin") == [5]
    with pytest.raises(UnknownLabelError) as amb:
        resolve_labels(space, "i")
    assert amb.value.ambiguous and (0, "Bronchiolitis") in amb.value.candidates
    with pytest.raises(UnknownLabelError) as unknown:
        resolve_labels(space, "wheezng")
    assert not unknown.value.ambiguous and unknown.value.candidates == [(7, "wheezing")]
    with pytest.raises(UnknownLabelError) as part:  # a part of two labels is still ambiguous
        resolve_labels(SearchSpace(random_codes(0), {1: "dry cough", 4: "wet cough"}, {}), "cough")
    assert part.value.candidates == [(1, "dry cough"), (4, "wet cough")]


def test_a_label_several_features_share_reads_their_largest_activation() -> None:
    """Three demo features are all named "bronchiolite": label:"bronchiolite" means any of them (as
    family: does), not an error; an exact name still wins over labels that merely contain it."""
    codes = sp.csr_matrix(np.array([[0.5, 0, 0, 0], [0, 0.25, 0, 0], [0, 0, 0.75, 0], [0.125, 0.5, 0, 0.875]],
                                   dtype=np.float32)).tocsc()
    space = SearchSpace(codes, {0: "Cough", 1: "cough", 2: "night cough", 3: "fever"}, {})
    assert resolve_labels(space, "cough") == [0, 1]
    match = evaluate('label:"cough"', space)
    assert match.mask.tolist() == [True, True, False, True] and match.features == [0, 1]
    np.testing.assert_array_equal(match.score, np.array([0.5, 0.25, 0, 0.5], dtype=np.float32))
    assert evaluate('label:"cough" > 0.3', space).mask.tolist() == [True, False, False, True]
    assert evaluate('any(label:"cough", F3) >= 0.875', space).mask.tolist() == [False, False, False, True]
    assert evaluate('label:"cough" AND NOT label:"fever"', space).mask.tolist() == [True, True, False, False]


def test_errors_name_the_index_family_and_position() -> None:
    space = SearchSpace(random_codes(0), LABELS, FAMILIES)
    with pytest.raises(FeatureOutOfRange) as oor:
        evaluate("F1 AND\n F24 > 0", space)
    assert (oor.value.index, oor.value.n_features, oor.value.line, oor.value.column) == (24, N_FEATURES, 2, 2)
    assert "F24" in str(oor.value) and "F0..F23" in str(oor.value)
    with pytest.raises(UnknownFamilyError) as fam:
        evaluate("family:99", space)
    assert fam.value.family_id == 99
    with pytest.raises(UnknownLabelError) as lab:
        evaluate('F1 OR label:"nothing like it"', space)
    assert (lab.value.line, lab.value.column) == (1, 7)


def test_only_referenced_columns_are_read() -> None:
    class CountingSpace(SearchSpace):
        reads: list[int]
        merged: list[list[int]]

        def column(self, index: int) -> np.ndarray:
            self.reads.append(index)
            return super().column(index)

        def largest(self, indices) -> np.ndarray:  # noqa: ANN001
            self.merged.append(list(indices))
            return super().largest(indices)

    space = CountingSpace(random_codes(1), LABELS, FAMILIES)
    space.reads, space.merged = [], []
    match = evaluate("F3 > 0.5 AND (F3 < 1.5 OR NOT F7) AND family:2", space)
    assert space.reads == [3, 7]  # each once, though F3 is used twice
    assert space.merged == [[3, 5, 9, 11]]  # a family's members in one pass over their non-zeros
    assert match.features == [3, 7, 5, 9, 11]
