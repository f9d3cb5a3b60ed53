"""Search results, CSV exports and feature examples leave an audit event with the dataset and the
number of documents shown; a query is recorded by its length and a keyed hash, never its words."""

from __future__ import annotations

import importlib
import json

import pytest

from contracts.examples import Example, FeatureExamples
from tests.concepts.conftest import N_DOCS
from tests.gateway.polling import wait_done

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]


async def audit(client, auth, action: str) -> list[dict]:  # noqa: ANN001
    resp = await client.get("/api/v1/audit-events", headers=auth, params={"action": action})
    assert resp.status_code == 200
    return resp.json()


async def test_search_results_are_audited_with_a_query_fingerprint(client, auth, labelled_run) -> None:  # noqa: ANN001
    run = labelled_run
    query = 'label:"bronchiolite" AND F1 > 0.3'
    for _ in range(2):
        found = await client.post(f"/api/v1/sae-runs/{run.run_id}/search", headers=auth,
                                  json={"mode": "expression", "expression": query, "limit": 7})
        assert found.status_code == 200, found.text
    page = await client.get(f"/sae-runs/{run.run_id}/search", headers=auth, params={"q": "F0 > 0.5 AND F1 > 0"})
    assert page.status_code == 200
    labels = await client.post(f"/api/v1/sae-runs/{run.run_id}/search", headers=auth,
                               json={"mode": "label", "query": "otite"})
    assert labels.status_code == 200  # features, not documents: not a read of text
    events = await audit(client, auth, "search.results")
    assert len(events) == 3
    dashboard, api2, api1 = events
    assert api1["target_id"] == str(run.dataset_id) and api1["details"]["count"] == 7
    assert api1["details"]["total"] == found.json()["total"] and api1["details"]["mode"] == "expression"
    assert api1["details"]["query_chars"] == len(query)
    assert api1["details"]["query_hmac"] == api2["details"]["query_hmac"] != dashboard["details"]["query_hmac"]
    assert dashboard["details"]["sae_run_id"] == run.run_id
    assert "bronchiolite" not in json.dumps(events) and "F1" not in json.dumps(events)


async def test_csv_export_is_audited(client, auth, labelled_run) -> None:  # noqa: ANN001
    created = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": labelled_run.run_id, "name": "bronch", "kind": "expression", "expression": "F0 > 0"})
    concept_id = created.json()["id"]
    job = (await client.post(f"/api/v1/concepts/{concept_id}/apply", headers=auth)).json()
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=60))["status"] == "succeeded"
    exported = await client.get(f"/api/v1/concepts/{concept_id}/export.csv", headers=auth)
    assert exported.status_code == 200
    (event,) = await audit(client, auth, "export.csv")
    n_rows = len(exported.text.strip().splitlines()) - 1
    assert event["details"] == {"count": n_rows, "concept_id": concept_id} and 0 < n_rows < N_DOCS
    assert event["target_id"] == str(labelled_run.dataset_id)


async def test_feature_examples_are_audited(app, client, auth, labelled_run, monkeypatch) -> None:  # noqa: ANN001
    module = importlib.import_module("gateway.dashboard.feature_examples")  # the package re-exports its router

    shown = FeatureExamples(feature=0, n_activating=3, activating=[
        Example(position=p, doc_id=labelled_run.doc_ids[p], activation=1.0, quantile=0) for p in (0, 1, 4)])

    async def fake_post(service: str, path: str, body: dict) -> dict:
        assert (service, path) == ("interpreter", "/examples")
        return shown.model_dump(mode="json")

    monkeypatch.setattr(module, "interpreter_corpus", lambda session, run_id: None)
    monkeypatch.setattr(module, "ExamplesRequest", lambda **kw: type("R", (), {"model_dump": lambda self, **k: {}})())
    monkeypatch.setattr(app.state.services, "post", fake_post)
    frag = await client.get(f"/sae-runs/{labelled_run.run_id}/features/0/examples", headers=auth)
    assert frag.status_code == 200 and "visita numero 4" in frag.text
    (event,) = await audit(client, auth, "feature.examples")
    assert event["details"] == {"count": 3, "sae_run_id": labelled_run.run_id, "feature": 0}
    assert "visita" not in json.dumps(event)
