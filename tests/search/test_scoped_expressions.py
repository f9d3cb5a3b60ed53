"""SEGMENT(…): parsed wherever a condition goes, never nested; evaluated on segment rows and reduced
to documents, checked against a naive per-segment evaluation on tiny random codes (matches, scores
and the segment each match points at); a run without segment codes is an error at the SEGMENT.
Over HTTP: a run whose result lists segment artifacts answers with the matched segment's span, and
the page marks it in the excerpt, escaped."""

from __future__ import annotations

import re
from urllib.parse import quote

import numpy as np
import pytest
import scipy.sparse as sp
from sqlalchemy import select

from gateway.db import session_scope
from gateway.domain.datasets.models import Document
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from gateway.search import ast
from gateway.search.expressions import (
    ExpressionError,
    NoSegmentCodes,
    SearchSpace,
    SegmentCodes,
    UnknownLabelError,
    evaluate,
    parse,
)
from gateway.search.results import EXCERPT_CHARS
from gateway.search.space import clear_cache
from tests.factories import write_segment_codes
from tests.search.test_expression_eval import FAMILIES, LABELS, RandomExpressions, naive_condition
from tests.search.test_expression_grammar import shape

N_DOCS, N_FEATURES, K = 30, 12, 3  # features 0..11 hold every label and family member of LABELS, FAMILIES



@pytest.mark.parametrize(("text", "tree"), [
    ("SEGMENT(F1)", "SEG[F1]"),
    ("segment ( F1 > 0.5 )", "SEG[(F1 > 0.5)]"),
    ("Sentence(F1 AND NOT F2)", "SEG[(F1 AND (NOT F2))]"),
    ('SEGMENT(label:"bronchiolite" AND NOT label:"sospetto") AND F3 > 0',
     "(SEG[(label[bronchiolite] AND (NOT label[sospetto]))] AND (F3 > 0))"),
    ("F3 OR SEGMENT(F1) AND F2", "(F3 OR (SEG[F1] AND F2))"),
    ("NOT SEGMENT(F1 OR F2)", "(NOT SEG[(F1 OR F2)])"),
    ("(SEGMENT(F1))", "SEG[F1]"),
    ("SEGMENT(F1) AND SEGMENT(F2)", "(SEG[F1] AND SEG[F2])"),
    ("SEGMENT(0.7*F1 + 0.3*F2 >= 0.5)", "SEG[(((0.7 * F1) + (0.3 * F2)) >= 0.5)]"),
    ("SEGMENT(any(F1, family:2) > 0.2)", "SEG[(any(F1,family[2]) > 0.2)]"),
    ("F1 AND\n  SEGMENT(\n F2)", "(F1 AND SEG[F2])"),
])
def test_segment_goes_wherever_a_condition_goes(text: str, tree: str) -> None:
    assert shape(parse(text).root) == tree


def test_segment_keeps_its_position() -> None:
    root = parse("F1 AND\n  segment(F2)").root
    assert isinstance(root.right, ast.Segment) and (root.right.line, root.right.column) == (2, 3)
    assert (root.right.item.line, root.right.item.column) == (2, 11)


@pytest.mark.parametrize(("text", "line", "column", "message", "expected"), [
    ("SEGMENT(F1 AND SEGMENT(F2))", 1, 16, "cannot be nested", []),
    ("F1 OR SEGMENT(F1 AND\n  (F2 OR sentence(F3)))", 2, 10, "cannot be nested", []),
    ("SEGMENT(F1 AND F2", 1, 18, "ends too early",
     ["')'", "'*'", "'+'", "'-'", "AND", "OR", "a comparison (> >= < <= =)"]),
    ("SEGMENT F1", 1, 9, "unexpected 'F1'", ["'('"]),
    ("SEGMENT", 1, 8, "ends too early", ["'('"]),
    ("SEGMENT(F1) > 0", 1, 13, "unexpected '>'", ["AND", "OR", "the end of the expression"]),
    ("any(SEGMENT(F1))", 1, 5, "unexpected 'SEGMENT'",
     ["'('", "'-'", "a feature (F12)", "a number", "any(…)", "family:N", 'label:"…"']),
    ("SEGMENT(1 > 0)", 1, 11, "involves no feature", ["a feature (F12)", "family:N", 'label:"…"']),
])
def test_segment_errors_say_where_and_what(text: str, line: int, column: int, message: str,
                                           expected: list[str]) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert message in err.message and err.expected == sorted(expected)


def random_segments(seed: int) -> tuple[sp.csc_matrix, SegmentCodes]:
    """0–5 segments a document (some have none), K active features a segment on a 1/8 grid (ties
    between segments happen); document codes are the row-wise max over the document's segments."""
    rng = np.random.default_rng(seed)
    per_doc = rng.integers(0, 6, N_DOCS)
    doc = np.repeat(np.arange(N_DOCS), per_doc)  # [segments]
    n_seg = len(doc)
    rows = np.repeat(np.arange(n_seg), K)
    cols = np.concatenate([rng.choice(N_FEATURES, K, replace=False) for _ in range(n_seg)])
    vals = rng.integers(1, 17, n_seg * K).astype(np.float32) / 8
    seg_codes = sp.csr_matrix((vals, (rows, cols)), shape=(n_seg, N_FEATURES))
    doc_codes = np.zeros((N_DOCS, N_FEATURES), dtype=np.float32)
    np.maximum.at(doc_codes, doc, seg_codes.toarray())
    spans = np.stack([np.arange(n_seg) * 10, np.arange(n_seg) * 10 + 7], axis=1)  # [segments, 2]
    return sp.csc_matrix(doc_codes), SegmentCodes(seg_codes.tocsc(), doc, spans)


def acts_of(codes: sp.csr_matrix, row: int) -> dict[int, float]:
    start, end = codes.indptr[row], codes.indptr[row + 1]
    return dict(zip(codes.indices[start:end].tolist(), codes.data[start:end].astype(np.float64).tolist()))


def naive_document(node: ast.Node, doc_acts: dict[int, float], segments: list[tuple[int, dict[int, float]]],
                   space: SearchSpace) -> tuple[bool, float, int]:
    """(matches, score, segment or -1) of a condition for one document whose segments are given as
    (index, activations): the meaning of SEGMENT spelt out one segment at a time."""
    if isinstance(node, ast.Segment):
        best = (False, 0.0, -1)
        for index, acts in segments:
            hit, score = naive_condition(node.item, acts, space)
            if hit and (not best[0] or score > best[1]):  # the best score; the earliest among equals
                best = (True, score, index)
        return best
    if isinstance(node, (ast.And, ast.Or)):
        left = naive_document(node.left, doc_acts, segments, space)
        right = naive_document(node.right, doc_acts, segments, space)
        hit = (left[0] and right[0]) if isinstance(node, ast.And) else (left[0] or right[0])
        segment = -1
        if hit and left[2] >= 0 and (right[2] < 0 or left[1] >= right[1]):
            segment = left[2]
        elif hit and right[2] >= 0:
            segment = right[2]
        return hit, max(left[1], right[1]), segment
    if isinstance(node, ast.Not):
        return not naive_document(node.item, doc_acts, segments, space)[0], 0.0, -1
    hit, score = naive_condition(node, doc_acts, space)
    return hit, score, -1


class ScopedExpressions(RandomExpressions):
    """RandomExpressions over N_FEATURES, with SEGMENT(…) (or SENTENCE) around some conditions, never nested."""

    inside = False

    def ref(self) -> str:
        text = super().ref()
        return f"F{self.r.randrange(N_FEATURES)}" if text.startswith("F") else text

    def condition(self, depth: int) -> str:
        if self.inside or self.r.random() > 0.35:
            return super().condition(depth)
        self.inside = True
        try:
            return f"{self.kw(self.r.choice(['SEGMENT', 'SENTENCE']))}({super().condition(max(depth - 1, 0))})"
        finally:
            self.inside = False


@pytest.mark.parametrize("seed", range(4))
def test_scoped_evaluation_equals_naive_per_segment(seed: int) -> None:
    doc_codes, segments = random_segments(seed)
    space = SearchSpace(doc_codes, LABELS, FAMILIES, segments=segments)
    doc_rows, seg_rows = doc_codes.tocsr(), segments.codes.tocsr()
    docs = [(acts_of(doc_rows, d), [(int(s), acts_of(seg_rows, s)) for s in np.flatnonzero(segments.doc == d)])
            for d in range(N_DOCS)]
    gen, scoped = ScopedExpressions(seed), 0
    for _ in range(40):
        text = gen.condition(3)
        expr = parse(text)
        has_segment = any(isinstance(n, ast.Segment) for n in ast.walk(expr.root))
        try:
            match = evaluate(expr, space)
        except UnknownLabelError:
            with pytest.raises(UnknownLabelError):
                [naive_document(expr.root, acts, segs, space) for acts, segs in docs]
            continue
        expected = [naive_document(expr.root, acts, segs, space) for acts, segs in docs]
        np.testing.assert_array_equal(match.mask, [m for m, _, _ in expected], err_msg=text)
        np.testing.assert_array_equal(match.score, np.array([s for _, s, _ in expected], dtype=np.float32),
                                      err_msg=text)
        assert match.segment is None or has_segment, text  # None: no SEGMENT, or each one under NOT
        got = np.full(N_DOCS, -1) if match.segment is None else match.segment
        np.testing.assert_array_equal(got, [g for _, _, g in expected], err_msg=text)
        scoped += int((got >= 0).any())
    assert scoped > 0  # some documents matched through a segment


def test_the_same_sentence_is_not_the_same_document() -> None:
    # features: 0 bronchiolitis, 1 suspected. Doc 0: one sentence with both, one with F0 alone;
    # doc 1: both in one sentence only; doc 2: F0 in one sentence, F1 in the next.
    seg = np.array([[0.5, 0.4], [0.25, 0], [0.9, 0.6], [0.75, 0], [0, 0.5]], dtype=np.float32)
    segments = SegmentCodes(sp.csc_matrix(seg), [0, 0, 1, 2, 2], [[0, 30], [31, 50], [0, 40], [0, 20], [21, 44]])
    space = SearchSpace(sp.csc_matrix(np.array([[0.5, 0.4], [0.9, 0.6], [0.75, 0.5]], dtype=np.float32)),
                        {0: "bronchiolitis", 1: "suspected bronchiolitis"}, segments=segments)
    whole = evaluate('label:"bronchiolitis" AND NOT label:"suspected"', space)
    assert whole.mask.tolist() == [False, False, False] and whole.segment is None
    confirmed = evaluate('SEGMENT(label:"bronchiolitis" AND NOT label:"suspected")', space)
    assert confirmed.mask.tolist() == [True, False, True]
    assert confirmed.segment.tolist() == [1, -1, 3] and confirmed.score.tolist() == [0.25, 0, 0.75]
    assert confirmed.features == [0, 1]
    either = evaluate("SEGMENT(F0 > 0.6) OR SEGMENT(F1)", space)  # the higher-scoring SEGMENT's segment
    assert either.mask.tolist() == [True, True, True] and either.segment.tolist() == [0, 2, 3]
    assert evaluate("NOT SEGMENT(F1)", space).segment is None  # a match by absence points at no segment


def test_a_run_without_segment_codes_says_so_at_the_segment() -> None:
    space = SearchSpace(sp.csc_matrix(np.eye(3, dtype=np.float32)))
    with pytest.raises(NoSegmentCodes) as info:
        evaluate("F1 AND\n  SEGMENT(F2)", space)
    assert isinstance(info.value, ExpressionError)  # answered as every expression error is (a 422)
    assert (info.value.line, info.value.column) == (2, 3)
    assert "no segment codes" in str(info.value) and "line 2, column 3" in str(info.value)
    assert evaluate("F1 AND NOT F2", space).segment is None  # and without SEGMENT nothing changes


def test_segment_codes_must_fit_the_documents() -> None:
    codes = sp.csc_matrix(np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="non-decreasing"):
        SegmentCodes(codes, [1, 0, 2], np.zeros((3, 2)))
    with pytest.raises(ValueError, match="segment code rows"):
        SegmentCodes(codes, [0, 1], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="do not fit"):
        SearchSpace(sp.csc_matrix(np.eye(2, dtype=np.float32)),
                    segments=SegmentCodes(codes, [0, 1, 2], np.zeros((3, 2))))


def test_random_expressions_use_segment_sometimes() -> None:
    texts = [ScopedExpressions(s).condition(3) for s in range(40)]
    assert any("SEGMENT" in t.upper() or "SENTENCE" in t.upper() for t in texts)
    assert all(parse(t) for t in texts)  # never nested


# -- over HTTP: a seeded run given two segments a document ---------------------------------------

FIRST = "Note {i}: <b>wheezing</b> & fever."
SECOND = "Suspected <bronchiolitis>."
FILLER = "filler " * 60  # odd documents: the second segment lies past the first EXCERPT_CHARS


HEADERS = "\nVisita.\n\nEsami:\nnella norma.\n\nConclusione:\n"  # every fourth document, from the second: short lines


def segmented_text(i: int) -> tuple[str, list[tuple[int, int]]]:
    first, middle = FIRST.format(i=i), " " + (FILLER if i % 2 else HEADERS if i % 4 == 2 else "")
    return first + middle + SECOND, [(0, len(first)), (len(first) + len(middle), len(first) + len(middle) + len(SECOND))]


@pytest.fixture
def segmented(app, seeded):  # noqa: ANN001, ANN201
    """Segment 2i of document i holds its even features, segment 2i+1 its odd ones (so the document
    codes stay the row-wise max), written as artifacts the run's result lists; texts to match."""
    dense = seeded.codes.toarray()
    n_docs, n = dense.shape
    seg = np.zeros((2 * n_docs, n), dtype=np.float32)
    seg[0::2, 0::2], seg[1::2, 1::2] = dense[:, 0::2], dense[:, 1::2]
    spans = np.array([segmented_text(i)[1] for i in range(n_docs)]).reshape(-1, 2)  # [segments, 2]
    with session_scope(app.state.factory) as session:
        run = session.get(SaeRun, seeded.run_id)
        dataset_id = session.get(EmbeddingRun, run.embedding_run_id).dataset_id
        for doc in session.scalars(select(Document).where(Document.dataset_id == dataset_id)):
            doc.text = segmented_text(doc.position)[0]
        write_segment_codes(app.state.store, run, seg, np.repeat(np.arange(n_docs), 2), spans)
    clear_cache()
    return seeded


async def post(client, auth, run_id: int, expression: str, **page):  # noqa: ANN001, ANN201
    return await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth,
                             json={"mode": "expression", "expression": expression, **page})


@pytest.mark.anyio
async def test_the_api_points_at_the_matched_segment(client, auth, segmented) -> None:  # noqa: ANN001
    dense = segmented.codes.toarray()
    resp = await post(client, auth, segmented.run_id, "SEGMENT(F0 AND F2)", limit=200)
    assert resp.status_code == 200, resp.text
    items = resp.json()["items"]
    assert {d["position"] for d in items} == set(np.flatnonzero((dense[:, 0] > 0) & (dense[:, 2] > 0)).tolist())
    for d in items:
        first = FIRST.format(i=d["position"])
        assert d["segment"] == {"index": 2 * d["position"], "start": 0, "end": len(first)}
        assert d["excerpt_start"] == 0 and d["excerpt"].startswith(first)
        assert d["score"] == pytest.approx(dense[d["position"], [0, 2]].max())
    # in the same document, not in the same segment: the even and the odd features never meet
    together = await post(client, auth, segmented.run_id, "F0 AND F1")
    apart = await post(client, auth, segmented.run_id, "SEGMENT(F0 AND F1)")
    assert together.json()["total"] == int(((dense[:, 0] > 0) & (dense[:, 1] > 0)).sum()) > 0
    assert apart.json()["total"] == 0
    plain = (await post(client, auth, segmented.run_id, "F0")).json()["items"]
    assert all(d["segment"] is None and d["excerpt_start"] == 0 for d in plain)


@pytest.mark.anyio
async def test_a_hit_shows_what_its_segment_held(client, auth, segmented) -> None:  # noqa: ANN001
    # F1 lives in the odd segments only: SEGMENT(F0 AND NOT F1) matches through the even segment, where F1 is
    # silent, even in a document where F1 fires; the hit says so, and keeps the document's own activations
    dense = segmented.codes.toarray()
    items = (await post(client, auth, segmented.run_id, "SEGMENT(F0 AND NOT F1)", limit=200)).json()["items"]
    assert {d["position"] for d in items} == set(np.flatnonzero(dense[:, 0] > 0).tolist())
    both = [d for d in items if dense[d["position"], 1] > 0]
    assert both
    for d in items:
        assert [(f["index"], f["activation"]) for f in d["segment_features"]] == [(0, pytest.approx(
            dense[d["position"], 0]))]
    for d in both:
        assert {f["index"] for f in d["features"]} == {0, 1}  # in the document, not in the matched segment
    plain = (await post(client, auth, segmented.run_id, "F0 AND NOT F1")).json()["items"]
    assert plain and all(d["segment_features"] is None for d in plain)  # no SEGMENT: no segment read
    page = await client.get(f"/sae-runs/{segmented.run_id}/search?q={quote('SEGMENT(F0 AND NOT F1)')}&limit=200",
                            headers=auth)
    cells = re.findall(r'<td class="matching">(.*?)</td>', page.text, re.S)
    assert len(cells) == min(len(items), 20)
    elsewhere = [c for c in cells if "elsewhere in the document" in c]
    assert elsewhere and all('<a href="/sae-runs/' in c.split("elsewhere in the document")[1] for c in elsewhere)
    assert all(">F1<" not in c.split("elsewhere")[0] for c in cells)  # F1 never shown as held by the segment


@pytest.mark.anyio
async def test_a_far_segment_moves_the_excerpt(client, auth, segmented) -> None:  # noqa: ANN001
    items = (await post(client, auth, segmented.run_id, "SEGMENT(F1)", limit=200)).json()["items"]
    odd = [d for d in items if d["position"] % 2]
    assert odd and len(items) == int((segmented.codes.toarray()[:, 1] > 0).sum())
    for d in odd:
        seg, at = d["segment"], d["excerpt_start"]
        assert seg["index"] == 2 * d["position"] + 1 and seg["start"] > EXCERPT_CHARS and 0 < at < seg["start"]
        assert d["excerpt"][seg["start"] - at:seg["end"] - at] == SECOND


@pytest.mark.anyio
async def test_short_lines_before_the_segment_move_the_excerpt(client, auth, segmented) -> None:  # noqa: ANN001
    # the segment lies within the first EXCERPT_CHARS, but below seven line breaks: a page showing the excerpt's
    # first lines would not show it, so the excerpt starts two line breaks before it
    items = (await post(client, auth, segmented.run_id, "SEGMENT(F1)", limit=200)).json()["items"]
    headed = [d for d in items if d["position"] % 4 == 2]
    assert headed
    for d in headed:
        seg, at = d["segment"], d["excerpt_start"]
        assert seg["end"] < EXCERPT_CHARS and 0 < at < seg["start"]
        assert d["excerpt"][:seg["start"] - at] == "Conclusione:\n"
        assert d["excerpt"][seg["start"] - at:seg["end"] - at] == SECOND


@pytest.mark.anyio
async def test_the_page_marks_the_segment_escaped(client, auth, segmented) -> None:  # noqa: ANN001
    resp = await client.get(f"/sae-runs/{segmented.run_id}/search?q={quote('sentence(F1)')}", headers=auth)
    assert resp.status_code == 200, resp.text
    html = resp.text
    assert "<bronchiolitis>" not in html and "<b>wheezing" not in html
    marked = re.findall(r'<div class="doc-text">(.*?)</div>', html, re.S)
    assert marked and all('<mark title="the segment that matched">Suspected &lt;bronchiolitis&gt;.</mark>' in m
                          for m in marked)
    even = [m for m in marked if m.startswith("Note ")]
    assert even and all("&lt;b&gt;wheezing&lt;/b&gt; &amp; fever. <mark" in m for m in even)
    assert any(m.startswith("… ") for m in marked)  # an odd document's excerpt starts further on


@pytest.mark.anyio
async def test_segment_on_a_run_without_segments_is_a_422(client, auth, seeded) -> None:  # noqa: ANN001
    resp = await post(client, auth, seeded.run_id, "F1 AND\n  SEGMENT(F2)")
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert (body["line"], body["column"], body["field"]) == (2, 3, "expression")
    assert "no segment codes" in body["detail"] and "SEGMENT" in body["detail"]
    page = await client.get(f"/sae-runs/{seeded.run_id}/search?q={quote('SEGMENT(F2)')}", headers=auth)
    assert page.status_code == 422 and "no segment codes" in page.text


NOTE = ("MOTIVO DELLA VISITA: tosse da 3 giorni.\n\nIndagini:\nTest RSV non eseguito.\n\nConclusione diagnostica\n"
        "Sospetta bronchiolite acuta.\n\nTerapia impostata:\nAerosol con soluzione ipertonica 3%.\n")


@pytest.mark.parametrize("header_lines", [0, 1, 6])
def test_the_excerpt_keeps_at_most_two_line_breaks_before_the_segment(header_lines: int) -> None:
    from gateway.search.results import EXCERPT_LINES_BEFORE, SegmentHit, excerpt_around

    text = "Visita.\n" * header_lines + NOTE
    begin = text.index("Sospetta")
    segment = SegmentHit(index=0, start=begin, end=text.index("\n", begin))
    start, excerpt = excerpt_around(text, segment)
    before = text[start:segment.start]
    assert excerpt == text[start:start + len(excerpt)] and segment.end - start <= len(excerpt)
    assert before.count("\n") <= EXCERPT_LINES_BEFORE and not before.startswith("\n")
    assert before == "Conclusione diagnostica\n"  # the line that says what the segment is
    # a segment among the first lines: the excerpt starts with the note
    first = SegmentHit(index=0, start=0, end=text.index("\n"))
    assert excerpt_around(text, first) == (0, text[:len(excerpt_around(text, first)[1])])


def test_the_excerpt_starts_at_a_word() -> None:
    from gateway.search.results import SegmentHit, excerpt_around

    text = ("Anamnesi muta. " * 20 + "Parametri vitali: FC 122, FR 45/min, Sat O2 92%, TC 36,7. "
            "Si pone diagnosi di bronchiolite.")
    begin = text.index("Si pone")
    start, excerpt = excerpt_around(text, SegmentHit(index=0, start=begin, end=len(text)))
    assert 0 < start < begin and text[start - 1] == " " and excerpt.endswith("bronchiolite.")
