"""Expressions past a limit are a 422 that names it (and where), in the search API and in concepts that
save expressions; they were 500s (RecursionError, lark's VisitError) or a dense column per feature.
The search box's completion answers only boxes it can scan cheaply."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.dashboard.search_pages import MAX_SUGGEST_CHARS
from gateway.search.expressions import MAX_FEATURES
from gateway.search.parser import MAX_DEPTH, MAX_NODES
from gateway.search.space import clear_cache
from tests.concepts.conftest import write_run

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]
N_DOCS, N_FEATURES = 30, 2000


@pytest.fixture
async def wide_run(app, client, auth) -> tuple[int, sp.csc_matrix]:  # noqa: ANN001
    """A run of 2,000 features (F0 "bronchiolite", F1 "sospetto", … as the concepts' fixture names them)."""
    clear_cache()
    rows = "\n".join(f"n{i},nota {i}" for i in range(N_DOCS))
    resp = await client.post("/api/v1/datasets", headers=auth, files={"file": ("w.csv", f"id,text\n{rows}\n".encode())})
    assert resp.status_code == 201, resp.text
    codes = sp.random(N_DOCS, N_FEATURES, density=0.05, format="csr", dtype=np.float32, random_state=0)
    return write_run(app, resp.json()["id"], codes), codes.tocsc()


async def test_expression_limits_are_422s_naming_them(client, auth, wide_run) -> None:  # noqa: ANN001
    run_id, codes = wide_run
    too_many = "any(" + ", ".join(f"F{i}" for i in range(MAX_FEATURES + 1)) + ")"
    cases = [
        ("NOT " * 2000 + "F1", f"{MAX_DEPTH} levels"),
        ("+".join(["F0"] * 3000), f"{MAX_DEPTH} levels"),
        ("any(" + ", ".join(["0.5*F1"] * 700) + ")", f"{MAX_NODES} numbers, references and operators"),
        (too_many, f"{MAX_FEATURES} distinct features"),
        ('F1 OR label:"\\x"', "unknown escape '\\x'"),
    ]
    for expression, named in cases:
        resp = await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth,
                                 json={"mode": "expression", "expression": expression})
        assert resp.status_code == 422, (expression[:40], resp.text[:300])
        body = resp.json()
        assert named in body["detail"] and body["field"] == "expression", body
    escape = (await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth,
                                json={"mode": "expression", "expression": 'F1 OR label:"\\x"'})).json()
    assert (escape["line"], escape["column"]) == (1, 14)  # the backslash
    deep = (await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth,
                              json={"mode": "expression", "expression": "NOT " * 2000 + "F1"})).json()
    assert (deep["line"], deep["column"]) == (1, 4 * MAX_DEPTH + 1)  # the first NOT past the limit

    # within the limits: any() of many features, merged sparsely, equals the codes' max
    members = list(range(0, 2 * (MAX_FEATURES - 1), 2))  # with F1: the limit exactly
    ok = await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth, json={
        "mode": "expression", "expression": "any(" + ", ".join(f"F{i}" for i in members) + ", 0.5*F1) > 0.3",
        "limit": 200})
    assert ok.status_code == 200, ok.text
    dense = codes.toarray()
    want = np.maximum(dense[:, members].max(1), 0.5 * dense[:, 1].astype(np.float64)) > 0.3
    assert ok.json()["total"] == int(want.sum()) > 0
    assert [f["index"] for f in ok.json()["features"]] == [*members, 1]

    # a concept saving an expression gets the same 422s
    for expression, named in [("NOT " * 999 + "F1", f"{MAX_DEPTH} levels"), ('label:"\\q"', "unknown escape")]:
        resp = await client.post("/api/v1/concepts", headers=auth, json={
            "sae_run_id": run_id, "name": "deep", "kind": "expression", "expression": expression})
        assert resp.status_code == 422 and resp.json()["field"] == "expression", resp.text[:300]
        assert named in resp.json()["detail"] and resp.json()["locator"].startswith("line 1, column ")


async def test_suggestions_bound_the_box(client, auth, wide_run) -> None:  # noqa: ANN001
    run_id, _ = wide_run
    url = f"/sae-runs/{run_id}/search/suggest"
    over = await client.get(url, params={"q": "F1 " * (MAX_SUGGEST_CHARS // 3 + 1)}, headers=auth)
    assert over.status_code == 422 and over.json()["field"] == "query.q", over.text
    assert str(MAX_SUGGEST_CHARS) in over.json()["message"]
    # boxes the old regex backtracked on, answered from their last token only
    quotes = (await client.get(url, params={"q": 'x"' * 900 + ' OR label:"sosp'}, headers=auth)).text
    assert 'label:&#34;sospetto&#34;' in quotes
    words = (await client.get(url, params={"q": "a" * 1900 + " AND bronch"}, headers=auth)).text
    assert ">F0 · bronchiolite · selects 1 note</option>" in words
    index = (await client.get(url, params={"q": "1" * 1900 + " OR F3"}, headers=auth)).text
    assert ">F3 · febbre</option>" in index
