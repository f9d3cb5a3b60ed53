"""Naming features through the gateway: the interpreter (keywords back-end) names every feature of
an SAE run, each name scored on held-out documents; the best is shown, unreliable ones flagged."""

from __future__ import annotations

import pytest

from contracts.interpret import ScoringConfig

from tests.gateway.polling import wait_done
from tests.gateway.test_sae_runs import SMALL, embedding_run  # noqa: F401 - fixture

pytestmark = [pytest.mark.anyio, pytest.mark.slow]



@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_name_the_features_of_an_sae_run(client, auth, embedding_run) -> None:  # noqa: ANN001, F811
    (run,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": embedding_run["id"], "config": SMALL},
                                headers=auth)).json()
    await wait_done(client, auth, f"/api/v1/sae-runs/{run['id']}", timeout=240)
    out_of_range = await client.post(f"/api/v1/sae-runs/{run['id']}/interpretations",
                                     json={"features": [5, 100000]}, headers=auth)
    assert out_of_range.status_code == 422 and out_of_range.json()["field"] == "features"
    assert "100000" in out_of_range.json()["detail"]

    densest = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=density&limit=20", headers=auth)).json()
    wanted = [f["index"] for f in densest["items"]]
    resp = await client.post(f"/api/v1/sae-runs/{run['id']}/interpretations",
                             json={"backends": [{"backend": "keywords"}], "features": wanted}, headers=auth)
    assert resp.status_code == 202, resp.text
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}")
    assert job["status"] == "succeeded", job
    assert job["result"]["n_named"] >= 10

    page = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=density&limit=20", headers=auth)).json()
    named = [f for f in page["items"] if f["label"]]
    assert len(named) == job["result"]["n_named"]
    for f in named:
        assert f["score"] is not None and 0 <= f["score"] <= 1
        assert f["reliable"] == (f["score"] >= ScoringConfig().embedding_threshold)
    first = named[0]
    interps = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{first['index']}/interpretations",
                                headers=auth)).json()
    assert interps and interps[0]["label"] == first["label"] and interps[0]["backend"] == "keywords"
    assert interps[0]["score_embedding"] == first["score"]
    ev = interps[0]["evidence"]
    assert ev["activating"] and not set(ev["activating"]) & set(ev["holdout_activating"])  # never shown what it is scored on
    detail = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{first['index']}", headers=auth)).json()
    assert detail["label"] == first["label"]

    # Search by label text, and filter by reliability.
    base = f"/api/v1/sae-runs/{run['id']}/features?limit=500"
    word = first["label"].split(",")[0].strip()
    hits = (await client.get(f"{base}&q={word.upper()}", headers=auth)).json()
    assert hits["total"] >= 1 and first["index"] in [f["index"] for f in hits["items"]]
    for hit in hits["items"]:  # label or description of the shown (best) name contains the text
        shown = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{hit['index']}/interpretations",
                                  headers=auth)).json()[0]
        assert word.lower() in f"{shown['label']} {shown['description'] or ''}".lower()
    assert (await client.get(f"{base}&q=%25", headers=auth)).json()["total"] == 0  # '%' is literal, not a wildcard
    reliable = (await client.get(f"{base}&reliability=reliable", headers=auth)).json()["items"]
    unreliable = (await client.get(f"{base}&reliability=unreliable", headers=auth)).json()["items"]
    unnamed = (await client.get(f"{base}&reliability=unnamed", headers=auth)).json()
    assert all(f["reliable"] is True for f in reliable) and all(f["reliable"] is False for f in unreliable)
    assert all(f["label"] is None for f in unnamed["items"])
    assert len(reliable) + len(unreliable) == job["result"]["n_named"]
    assert len(reliable) + len(unreliable) + unnamed["total"] == SMALL["expansion_factor"] * 384
