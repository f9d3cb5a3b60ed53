"""One document as the SAE run reads it: the rows of CSC codes found column by column against a dense read of
random codes, a document's features and its segments' against the dense rows they come from; over HTTP the API
(segments with their own features, the name's threshold deciding `selected`, paging, 404s, the audit event) and
the page (segments in order, escaped, the marked feature shading only the segments where it fires)."""

from __future__ import annotations

import re
from urllib.parse import quote

import numpy as np
import pytest
import scipy.sparse as sp
from sqlalchemy import select

from gateway.db import session_scope
from gateway.domain.auth.models import AuditEvent
from gateway.domain.datasets.models import Document
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from gateway.search.document_view import read_document, rows_active, strongest
from gateway.search.expressions import SearchSpace
from gateway.search.space import clear_cache
from tests.search.conftest import add_interpretation
from tests.search.test_scoped_expressions import FIRST, SECOND, random_segments, segmented  # noqa: F401


def dense_rows(codes: sp.spmatrix, lo: int, hi: int) -> set[tuple[int, int, float]]:
    block = codes.toarray()[lo:hi]
    return {(int(r), int(f), float(block[r, f])) for r, f in zip(*np.nonzero(block))}


@pytest.mark.parametrize("seed", range(5))
def test_rows_are_read_column_by_column_as_a_dense_read_gives_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((40, 12)) < 0.3, rng.integers(1, 9, (40, 12)) / 8, 0).astype(np.float32)
    codes = sp.csc_matrix(dense)
    unsorted = sp.csc_matrix(dense)
    for f in range(12):  # the same entries, each column's rows reversed: the path for unsorted indices
        a, b = unsorted.indptr[f], unsorted.indptr[f + 1]
        unsorted.indices[a:b], unsorted.data[a:b] = unsorted.indices[a:b][::-1].copy(), unsorted.data[a:b][::-1].copy()
    unsorted.has_sorted_indices = False
    spans = [(0, 1), (3, 9), (39, 40), (0, 40), (10, 10)] + [tuple(sorted(rng.integers(0, 41, 2))) for _ in range(5)]
    for lo, hi in spans:
        want = dense_rows(codes, lo, hi)
        for matrix in (codes, unsorted):
            rows, feats, vals = rows_active(matrix, lo, hi)
            assert len(rows) == len(want)
            assert {(int(r), int(f), float(v)) for r, f, v in zip(rows, feats, vals)} == want


def test_strongest_first_ties_by_index_zeros_left_out() -> None:
    assert strongest(np.array([5, 2, 9, 1]), np.array([0.5, 0.5, 0.0, 0.7], dtype=np.float32), 8) == [
        (1, pytest.approx(0.7)), (2, 0.5), (5, 0.5)]
    assert strongest(np.array([5, 2]), np.array([0.5, 0.6], dtype=np.float32), 1) == [(2, pytest.approx(0.6))]


@pytest.mark.parametrize("seed", range(4))
def test_a_documents_features_and_its_segments_are_their_rows(seed: int) -> None:
    doc_codes, segments = random_segments(seed)
    space = SearchSpace(doc_codes, segments=segments)
    dense_doc, dense_seg = doc_codes.toarray(), segments.codes.toarray()
    for position in range(doc_codes.shape[0]):
        reading = read_document(space, position, limit=3, per_segment=2)
        row = dense_doc[position]
        assert reading.n_active == int(np.count_nonzero(row))
        assert reading.features == strongest(np.arange(len(row)), row, 3)
        mine = np.flatnonzero(segments.doc == position)
        assert reading.n_segments == len(mine) and [s.index for s in reading.segments] == mine.tolist()
        for s in reading.segments:
            assert (s.start, s.end) == tuple(segments.spans[s.index])
            assert s.n_active == int(np.count_nonzero(dense_seg[s.index]))
            assert s.features == strongest(np.arange(dense_seg.shape[1]), dense_seg[s.index], 2)
        for mark in range(dense_doc.shape[1]):  # a marked feature's activation, read from the same rows
            marked = read_document(space, position, limit=3, per_segment=2, mark=mark)
            assert marked.marked == pytest.approx(row[mark])
            assert [s.marked for s in marked.segments] == pytest.approx([dense_seg[i, mark] for i in mine])
        assert reading.marked is None and all(s.marked is None for s in reading.segments)
        paged = read_document(space, position, limit=3, per_segment=2, segment_offset=1, segment_limit=2)
        assert [s.index for s in paged.segments] == mine[1:3].tolist() and paged.n_segments == len(mine)
    plain = read_document(SearchSpace(doc_codes), 0, limit=3, per_segment=2)
    assert plain.segments is None and plain.n_segments is None


def documents_of(app, run_id: int) -> dict[int, int]:  # noqa: ANN001
    """position → document id in the run's dataset."""
    with session_scope(app.state.factory) as session:
        dataset_id = session.get(EmbeddingRun, session.get(SaeRun, run_id).embedding_run_id).dataset_id
        return {d.position: d.id for d in session.scalars(select(Document).where(Document.dataset_id == dataset_id))}


@pytest.mark.anyio
async def test_the_api_lists_each_segment_with_its_own_features(app, client, auth,  # noqa: ANN001
                                                                segmented) -> None:  # noqa: ANN001, F811
    dense = segmented.codes.toarray()
    with session_scope(app.state.factory) as session:  # F0 named with a threshold: selected only at or above it
        add_interpretation(session, run_id=segmented.run_id, index=0, label="bronchiolitis", threshold=0.5)
    clear_cache()
    ids = documents_of(app, segmented.run_id)
    below = next(p for p in range(dense.shape[0]) if 0 < dense[p, 0] < 0.5)
    above = next(p for p in range(dense.shape[0]) if dense[p, 0] >= 0.5)
    seen = set()
    for position in (0, 1, 7, below, above):
        resp = await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{ids[position]}", headers=auth)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert (body["position"], body["external_id"]) == (position, f"d{position}")
        first = FIRST.format(i=position)
        assert body["text"].startswith(first) and body["text"].endswith(SECOND)
        assert body["n_active"] == int(np.count_nonzero(dense[position])) and body["n_segments"] == 2
        even, odd = body["segments"]
        assert body["text"][even["start"]:even["end"]] == first and body["text"][odd["start"]:odd["end"]] == SECOND
        for seg, parity in ((even, 0), (odd, 1)):  # segment 2i holds the even features, 2i+1 the odd ones
            want = [f for f in np.flatnonzero(dense[position]) if f % 2 == parity]
            assert sorted(f["index"] for f in seg["features"]) == sorted(want)
            for f in seg["features"]:
                assert f["activation"] == pytest.approx(dense[position, f["index"]])
                if f["index"] == 0:
                    assert f["label"] == "bronchiolitis" and f["threshold"] == 0.5
                    assert f["selected"] is (f["activation"] >= 0.5)
                    seen.add(f["selected"])
                elif f["label"] is None:
                    assert f["selected"] is None
                else:  # named without a threshold: any activation
                    assert f["selected"] is True
        assert [f["activation"] for f in body["features"]] == sorted((f["activation"] for f in body["features"]),
                                                                        reverse=True)
    assert seen == {True, False}  # the threshold decides, both ways
    odd = next(p for p in range(dense.shape[0]) if dense[p, 1] > 0)  # `mark`: F1, in the odd segment only
    body = (await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{ids[odd]}?mark=1", headers=auth)).json()
    assert body["marked"]["index"] == 1 and body["marked"]["activation"] == pytest.approx(dense[odd, 1])
    assert body["marked"]["label"] == "suspected bronchiolitis" and body["marked"]["selected"] is True
    assert [s["marked_activation"] for s in body["segments"]] == [0.0, pytest.approx(dense[odd, 1])]
    unmarked = (await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{ids[odd]}", headers=auth)).json()
    assert unmarked["marked"] is None and all(s["marked_activation"] is None for s in unmarked["segments"])
    far = await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{ids[odd]}?mark={dense.shape[1]}",
                           headers=auth)
    assert far.status_code == 422 and "mark: feature" in far.json()["detail"] and "out of range" in far.text
    page = (await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{ids[3]}?segment_offset=1"
                             f"&segment_limit=1&per_segment=1&limit=2", headers=auth)).json()
    assert [s["index"] for s in page["segments"]] == [7] and page["segment_offset"] == 1
    assert len(page["features"]) <= 2 and all(len(s["features"]) <= 1 for s in page["segments"])
    with session_scope(app.state.factory) as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "document.features")).all()
        assert {e.details["document_id"] for e in events} >= {ids[0], ids[1], ids[7], ids[3]}
        assert all("Suspected" not in str(e.details) for e in events)


@pytest.mark.anyio
async def test_a_document_of_another_dataset_or_none_is_a_404(app, client, auth,  # noqa: ANN001
                                                               segmented) -> None:  # noqa: ANN001, F811
    other = await client.post("/api/v1/datasets", files={"file": ("o.csv", b"id,text\nx,another note\n")},
                              headers=auth)
    assert other.status_code == 201, other.text
    foreign = (await client.get(f"/api/v1/datasets/{other.json()['id']}/documents", headers=auth)).json()["items"][0]
    for document_id in (foreign["id"], 10**9):
        resp = await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{document_id}", headers=auth)
        assert resp.status_code == 404 and f"document {document_id} not found" in resp.json()["detail"]
        page = await client.get(f"/sae-runs/{segmented.run_id}/documents/{document_id}", headers=auth)
        assert page.status_code == 404
    for bad in ("limit=0", "per_segment=65", "segment_limit=1001", "segment_offset=-1"):
        resp = await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{foreign['id']}?{bad}", headers=auth)
        assert resp.status_code == 422 and bad.split("=")[0] in resp.text


@pytest.mark.anyio
async def test_the_page_marks_where_a_feature_fires(app, client, auth, segmented) -> None:  # noqa: ANN001, F811
    dense = segmented.codes.toarray()
    ids = documents_of(app, segmented.run_id)
    position = next(p for p in range(dense.shape[0]) if dense[p, 1] > 0 and dense[p, 0] > 0)
    url = f"/sae-runs/{segmented.run_id}/documents/{ids[position]}"
    resp = await client.get(f"{url}?feature=1", headers=auth)
    assert resp.status_code == 200, resp.text
    html = resp.text
    assert "<bronchiolitis>" not in html and "<b>wheezing" not in html  # the texts, escaped
    rows = re.findall(r'<tr( class="seg-marked")?><td class="num">(\d+)</td>\s*<td><div class="seg-text( shade-\d)?"'
                      r'[^>]*>(.*?)</div>', html, re.S)
    # F1 fires in the second segment only: the strongest there, so the darkest shade
    assert [(bool(m), n, shade) for m, n, shade, _ in rows] == [(False, "1", ""), (True, "2", " shade-5")]
    assert rows[0][3] == f"Note {position}: &lt;b&gt;wheezing&lt;/b&gt; &amp; fever."
    assert rows[1][3] == "Suspected &lt;bronchiolitis&gt;."
    assert "style=" not in html.split("<main")[1]  # the CSP refuses inline styles
    marked = re.search(r'<div class="marked-feature" id="marked">(.*?)</div>', html, re.S).group(1)
    assert "F1</a>" in marked and "suspected bronchiolitis" in marked and "fires in 1 of 2 segments" in marked
    assert f"{dense[position, 1]:.3f}" in marked
    assert 'href="/sae-runs/%d/features/1"' % segmented.run_id in html
    assert "?feature=0&amp;offset=0" in html  # each chip marks its feature
    plain = await client.get(url, headers=auth)
    assert plain.status_code == 200 and 'class="seg-marked"' not in plain.text and 'id="marked"' not in plain.text
    with session_scope(app.state.factory) as session:  # each page a read of the note's text, audited
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "document.features")).all()
        assert sum(e.details["document_id"] == ids[position] for e in events) == 2
    out_of_range = await client.get(f"{url}?feature={dense.shape[1]}", headers=auth)
    assert out_of_range.status_code == 404 and "out of range" in out_of_range.text
    search = await client.get(f"/sae-runs/{segmented.run_id}/search?q={quote('SEGMENT(F1)')}", headers=auth)
    assert f'href="{url}?feature=1"' in search.text  # a hit leads here, its feature marked


@pytest.mark.anyio
async def test_a_long_document_keeps_the_page_small(app, client, auth, segmented) -> None:  # noqa: ANN001, F811
    ids = documents_of(app, segmented.run_id)
    with session_scope(app.state.factory) as session:  # the segments' spans stay those of its first characters
        doc = session.get(Document, ids[0])
        doc.text = doc.text + " parola" * 40_000  # 280,000 characters more
        n_chars = len(doc.text)
    resp = await client.get(f"/sae-runs/{segmented.run_id}/documents/{ids[0]}", headers=auth)
    assert resp.status_code == 200, resp.text
    assert f"the first 100,000 of {n_chars:,} characters; the API returns the whole text" in resp.text
    assert len(resp.text) < 130_000
    api = await client.get(f"/api/v1/sae-runs/{segmented.run_id}/documents/{ids[0]}", headers=auth)
    assert len(api.json()["text"]) == n_chars
