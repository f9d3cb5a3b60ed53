"""POST /api/v1/sae-runs/{id}/search in expression and full-text label modes, on SQLite and
PostgreSQL: results equal to evaluating the codes directly, paging, and every 4xx."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.db import session_scope
from tests.search.conftest import N_DOCS, N_FEATURES, add_interpretation

pytestmark = pytest.mark.anyio


async def search(client, auth, run_id: int, **body):  # noqa: ANN001, ANN201
    return await client.post(f"/api/v1/sae-runs/{run_id}/search", json=body, headers=auth)


async def test_expression_results_match_the_codes(client, auth, seeded) -> None:  # noqa: ANN001
    dense = seeded.codes.toarray()
    expr = 'label:"bronchiolitis" AND NOT label:"suspected"'
    want = np.flatnonzero((dense[:, 0] > 0) & ~(dense[:, 1] > 0))
    resp = await search(client, auth, seeded.run_id, mode="expression", expression=expr, limit=5)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["mode"] == "expression" and body["total"] == len(want)
    assert [f["index"] for f in body["features"]] == [0, 1]
    assert body["features"][0]["label"] == "bronchiolitis"
    # best first: F0's activation descending, then position
    ranked = sorted(want.tolist(), key=lambda p: (-dense[p, 0], p))
    assert [d["position"] for d in body["items"]] == ranked[:5]
    top = body["items"][0]
    assert top["external_id"] == f"d{top['position']}" and "child" in top["excerpt"]
    assert top["features"] == [{"index": 0, "activation": pytest.approx(dense[top["position"], 0]),
                                "label": "bronchiolitis", "reliable": True}]
    pages = [await search(client, auth, seeded.run_id, mode="expression", expression=expr, limit=4, offset=o)
             for o in range(0, len(want), 4)]
    assert [d["position"] for p in pages for d in p.json()["items"]] == ranked


async def test_weighted_family_and_any(client, auth, seeded) -> None:  # noqa: ANN001
    dense = seeded.codes.toarray()
    resp = await search(client, auth, seeded.run_id, mode="expression", limit=200,
                        expression=f"0.7*F2 + 0.3*F4 >= 0.4 OR family:{seeded.family_id} > 0.9")
    want = (0.7 * dense[:, 2].astype(np.float64) + 0.3 * dense[:, 4] >= 0.4) | (dense[:, [0, 1, 5]].max(1) > 0.9)
    assert resp.json()["total"] == int(want.sum())
    assert {d["position"] for d in resp.json()["items"]} == set(np.flatnonzero(want).tolist())


@pytest.mark.parametrize(("expression", "checks"), [
    ("F3 >", {"line": 1, "column": 5, "field": "expression", "locator": "line 1, column 5"}),
    ("F1 AND\n  (F2 OR F3", {"line": 2, "column": 12}),
    (f"F1 OR F{N_FEATURES}", {"index": N_FEATURES, "n_features": N_FEATURES, "column": 7}),
    ('label:"bronch"', {"candidates": [{"index": 0, "label": "bronchiolitis"},
                                       {"index": 1, "label": "suspected bronchiolitis"}]}),
    ('label:"feverr"', {"candidates": [{"index": 3, "label": "fever"}]}),
    ("family:999", {"line": 1, "column": 1}),
])
async def test_expression_errors_are_422_saying_where(client, auth, seeded, expression, checks) -> None:  # noqa: ANN001
    resp = await search(client, auth, seeded.run_id, mode="expression", expression=expression)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    for key, value in checks.items():
        assert body[key] == value, body
    if "index" in checks:
        assert f"F{N_FEATURES}" in body["detail"]


async def test_a_parse_error_lists_what_was_expected(client, auth, seeded) -> None:  # noqa: ANN001
    body = (await search(client, auth, seeded.run_id, mode="expression", expression="F1 & F2")).json()
    assert "unexpected character '&'" in body["detail"] and "AND" in body["expected"] and "OR" in body["expected"]


async def test_words_typed_as_an_expression_are_told_what_they_could_mean(client, auth, seeded) -> None:  # noqa: ANN001
    """A name typed into the expression box: the 422 suggests label:"…" and lists the features of that name
    (or those whose names hold it, or the closest); an expression that merely fails to parse does not."""
    exact = (await search(client, auth, seeded.run_id, mode="expression", expression=" Bronchiolitis ")).json()
    assert exact["field"] == "expression" and exact["line"] == 1 and exact["column"] == 2, exact
    assert 'label:"Bronchiolitis" finds the features of that name' in exact["detail"], exact
    assert exact["candidates"] == [{"index": 0, "label": "bronchiolitis"}]
    within = (await search(client, auth, seeded.run_id, mode="expression", expression="suspected")).json()
    assert within["candidates"] == [{"index": 1, "label": "suspected bronchiolitis"}], within
    close = (await search(client, auth, seeded.run_id, mode="expression", expression="feverr")).json()
    assert 'label:"feverr"' in close["detail"] and close["candidates"] == [{"index": 3, "label": "fever"}], close
    assert (await search(client, auth, seeded.run_id, mode="expression", expression="zzzz qqqq")).json()["candidates"] == []
    for expression in ("fever AND", "F1 AND fever", "F1 fever", "fever > 0.3"):  # an expression gone wrong: no guess
        body = (await search(client, auth, seeded.run_id, mode="expression", expression=expression)).json()
        assert "is words, not an expression" not in body["detail"] and body["candidates"] == [], (expression, body)


async def test_bad_bodies_name_the_field(client, auth, seeded) -> None:  # noqa: ANN001
    for body, field in [({"mode": "sql", "query": "x"}, "body.mode"), ({"expression": "F1"}, "body.mode"),
                        ({"mode": "expression"}, "body.expression.expression"),
                        ({"mode": "expression", "expression": "F1", "limit": 0}, "body.expression.limit"),
                        ({"mode": "text", "text": "x", "offset": 995, "limit": 10}, "body.text")]:
        resp = await client.post(f"/api/v1/sae-runs/{seeded.run_id}/search", json=body, headers=auth)
        assert resp.status_code == 422 and resp.json()["field"] == field, resp.text
    # the kind of search is named by its field, not by pydantic's "Unable to extract tag using discriminator"
    missing = (await search(client, auth, seeded.run_id, expression="F1")).json()
    assert missing["message"] == "body.mode: required: it names the kind of request (see the schema at /api/v1/openapi.json)", missing
    wrong = (await search(client, auth, seeded.run_id, mode="sql", query="x")).json()
    assert wrong["message"] == "body.mode: 'sql' is not one of 'expression', 'text', 'label'", wrong


async def test_missing_run_unready_run_and_no_key(client, auth, seeded, app) -> None:  # noqa: ANN001
    assert (await search(client, auth, 9999, mode="expression", expression="F1")).status_code == 404
    with session_scope(app.state.factory) as session:
        from gateway.domain.runs.models import SaeRun

        session.get(SaeRun, seeded.run_id).status = "running"
    resp = await search(client, auth, seeded.run_id, mode="expression", expression="F1")
    assert resp.status_code == 409 and "running" in resp.json()["detail"]
    resp = await client.post(f"/api/v1/sae-runs/{seeded.run_id}/search", json={"mode": "expression", "expression": "F1"})
    assert resp.status_code == 401


async def test_label_fulltext_follows_interpretations(client, auth, seeded, app) -> None:  # noqa: ANN001
    resp = await search(client, auth, seeded.run_id, mode="label", query="bronch")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["total"] == 2 and {h["index"] for h in body["items"]} == {0, 1}
    two_words = (await search(client, auth, seeded.run_id, mode="label", query="Suspected BRONCH")).json()
    assert [h["index"] for h in two_words["items"]] == [1]
    by_description = (await search(client, auth, seeded.run_id, mode="label", query="mention otitis")).json()
    assert [h["index"] for h in by_description["items"]] == [2]
    assert (await search(client, auth, seeded.run_id, mode="label", query="asthma")).json()["total"] == 0
    # a new best interpretation replaces the shown label: the index follows, old label gone
    with session_scope(app.state.factory) as session:
        add_interpretation(session, run_id=seeded.run_id, index=2, label="ear infection with effusion")
    renamed = (await search(client, auth, seeded.run_id, mode="label", query="effusion")).json()
    assert [h["index"] for h in renamed["items"]] == [2]
    assert (await search(client, auth, seeded.run_id, mode="label", query="otitis")).json()["total"] == 0
    # and expressions see the new label at once
    expr = await search(client, auth, seeded.run_id, mode="expression", expression='label:"ear infection"')
    assert expr.status_code == 200 and expr.json()["features"][0]["index"] == 2
    assert (await search(client, auth, seeded.run_id, mode="label", query="%_'\"*:")).json()["total"] == 0


async def test_label_fulltext_quoted_words_are_whole_words(client, auth, seeded) -> None:  # noqa: ANN001
    """In the database's own full-text query (FTS5 on SQLite, tsquery on PostgreSQL): a quoted word matches whole
    words only, an unquoted one begins them, and names holding the words whole come first."""
    prefix = (await search(client, auth, seeded.run_id, mode="label", query="bronch")).json()
    assert prefix["total"] == 2
    assert (await search(client, auth, seeded.run_id, mode="label", query='"bronch"')).json()["total"] == 0
    whole = (await search(client, auth, seeded.run_id, mode="label", query='"bronchiolitis"')).json()
    assert {h["index"] for h in whole["items"]} == {0, 1}
    mixed = (await search(client, auth, seeded.run_id, mode="label", query='"suspected" bronch')).json()
    assert [h["index"] for h in mixed["items"]] == [1]
    assert N_DOCS > 0
