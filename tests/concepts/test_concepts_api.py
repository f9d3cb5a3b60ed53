"""/api/v1/concepts on SQLite and PostgreSQL: an expression and a probe with held-out metrics equal
to a computation by hand, named weights, every 4xx naming its field, apply as a job, CSV export."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from gateway.domain.concepts.probe import heldout_split
from tests.concepts.conftest import N_FEATURES
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio
CONFIRMED_VS_SUSPECTED = {"labels": {"positive": ["bronchiolitis:confirmed"], "negative": ["bronchiolitis:suspected"]}}
EXPRESSION = 'label:"bronchiolite" > 0 AND NOT F1 > 0'


def held_out(run, examples: dict) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """(positions, y) of the held-out split, computed here from the labels."""
    pos_lab, neg_lab = set(examples["labels"]["positive"]), set(examples["labels"]["negative"])
    positions = np.array([p for p, lab in enumerate(run.labels) if lab in pos_lab | neg_lab])
    y = np.array([int(run.labels[p] in pos_lab) for p in positions])
    test = heldout_split(y, test_fraction=0.25, seed=0).test
    return positions[test], y[test]


async def create(client, auth, run, **body):  # noqa: ANN001, ANN201
    return await client.post("/api/v1/concepts", json={"sae_run_id": run.run_id, **body}, headers=auth)


async def test_expression_concept_metrics_match_a_hand_count(client, auth, labelled_run) -> None:  # noqa: ANN001
    resp = await create(client, auth, labelled_run, name="confirmed", kind="expression", expression=EXPRESSION,
                        examples=CONFIRMED_VS_SUSPECTED)
    assert resp.status_code == 201, resp.text
    c = resp.json()
    dense = labelled_run.codes.toarray()
    positions, y = held_out(labelled_run, CONFIRMED_VS_SUSPECTED)
    pred = (dense[positions, 0] > 0) & ~(dense[positions, 1] > 0)
    tp, fp = int((pred & (y == 1)).sum()), int((pred & (y == 0)).sum())
    fn, tn = int((~pred & (y == 1)).sum()), int((~pred & (y == 0)).sum())
    m = c["metrics"]
    assert m["confusion"] == {"tp": tp, "fp": fp, "fn": fn, "tn": tn} and m["n_test"] == len(y) == 50
    assert m["precision"] == pytest.approx(tp / (tp + fp), abs=1e-4) and m["recall"] == pytest.approx(tp / (tp + fn), abs=1e-4)
    assert 0.7 < m["f1"] < 1.0 and m["n_train"] == 0 and m["pr_curve"] is None
    assert [(f["index"], f["label"]) for f in c["features"]] == [(0, "bronchiolite"), (1, "sospetto")]
    assert c["applied"] == {"job_id": None, "status": None, "n_matches": None, "n_documents": None, "export_url": None,
                            "trained_on": None}
    listed = (await client.get(f"/api/v1/concepts?sae_run_id={labelled_run.run_id}", headers=auth)).json()
    assert listed["total"] == 1 and listed["items"][0]["f1"] == m["f1"]


async def test_probe_learns_that_suspected_is_the_difference(client, auth, labelled_run) -> None:  # noqa: ANN001
    resp = await create(client, auth, labelled_run, name="probe", kind="probe", examples=CONFIRMED_VS_SUSPECTED)
    assert resp.status_code == 201, resp.text
    c = resp.json()
    weights = c["probe"]["weights"]
    assert weights[0]["index"] == 1 and weights[0]["weight"] < 0 and weights[0]["label"] == "sospetto"
    assert c["probe"]["n_features"] == len(weights) < N_FEATURES and c["probe"]["C"] > 0
    assert [w["index"] for w in weights] == [w["index"] for w in sorted(weights, key=lambda w: -abs(w["weight"]))]
    m = c["metrics"]
    positions, y = held_out(labelled_run, CONFIRMED_VS_SUSPECTED)
    assert m["n_test"] == len(y) and m["n_test_positive"] == int(y.sum()) and m["n_train"] == 150
    assert m["f1"] > 0.8
    curve = m["pr_curve"]
    assert curve["recall"][0] == 1.0 and curve["recall"][-1] == 0.0 and 0.8 < curve["average_precision"] <= 1.0
    again = await client.post(f"/api/v1/concepts/{c['id']}/evaluate", headers=auth)
    assert again.status_code == 200 and again.json()["confusion"] == m["confusion"]  # deterministic


async def test_every_bad_input_is_a_4xx_naming_the_field(client, auth, labelled_run) -> None:  # noqa: ANN001
    cases = [
        ({"name": "a", "kind": "probe", "segment_words": ["bronchiolit"]}, 422, "segment_words"),
        ({"name": "a", "kind": "expression"}, 422, "expression"),
        ({"name": "a", "kind": "probe", "expression": "F1", "examples": CONFIRMED_VS_SUSPECTED}, 422, "expression"),
        ({"name": "a", "kind": "probe", "examples": {"labels": {"positive": ["bronchiolitis:confirmd"]}}},
         422, "examples.labels.positive.0"),
        ({"name": "a", "kind": "probe", "examples": {"documents": {"positive": labelled_run.doc_ids[:12] + [10**9],
                                                                     "negative": labelled_run.doc_ids[12:30]}}},
         422, "examples.documents.positive.12"),
        ({"name": "a", "kind": "probe", "examples": {"documents": {"positive": labelled_run.doc_ids[:3],
                                                                     "negative": labelled_run.doc_ids[3:30]}}},
         422, "examples"),
        ({"name": "a", "kind": "probe", "examples": {}}, 422, "body.examples"),
        ({"name": "a", "kind": "sometimes"}, 422, "body.kind"),
        ({"name": "a", "kind": "expression", "expression": "F1", "colour": "red"}, 422, "body.colour"),
        ({"name": "a", "kind": "expression", "expression": f"F{N_FEATURES} > 0"}, 422, "expression"),
        ({"name": "a", "kind": "expression", "expression": "F1 > 0", "seed": {"expression": "F1 > 0"}}, 422, "seed"),
        ({"name": "a", "kind": "probe", "seed": {"expression": "F1 > AND"}}, 422, "seed.expression"),
        ({"name": "a", "kind": "probe", "seed": {"expression": "F1 > 0", "text": "x"}}, 422, "body.seed"),
    ]
    for body, code, field in cases:
        resp = await create(client, auth, labelled_run, **body)
        assert (resp.status_code, resp.json()["field"]) == (code, field), (body, resp.text)
        assert field.rsplit(".", 1)[-1] in json.dumps(resp.json())
    typo = (await create(client, auth, labelled_run, **cases[3][0])).json()
    assert "bronchiolitis:confirmed" in typo["candidates"]
    parse = (await create(client, auth, labelled_run, name="a", kind="expression", expression="F0 > 0 AND\n (F1")).json()
    assert (parse["line"], parse["locator"]) == (2, f"line 2, column {parse['column']}") and parse["expected"]
    label = (await create(client, auth, labelled_run, name="a", kind="expression", expression='label:"otite medio"')).json()
    assert label["field"] == "expression" and "otite media" in json.dumps(label)
    words = (await create(client, auth, labelled_run, name="a", kind="expression", expression="bronchiolite")).json()
    assert words["field"] == "expression" and 'label:"bronchiolite" finds the features' in words["detail"], words
    assert [c["index"] for c in words["candidates"]] == [0], words  # the feature of that name
    assert (await client.post("/api/v1/concepts", json={"sae_run_id": 999, "name": "a", "kind": "expression",
                                                        "expression": "F1"}, headers=auth)).json()["field"] == "sae_run_id"
    ok = await create(client, auth, labelled_run, name="twice", kind="expression", expression="F1 > 0")
    dup = await create(client, auth, labelled_run, name="twice", kind="expression", expression="F2 > 0")
    assert ok.status_code == 201 and (dup.status_code, dup.json()["field"]) == (409, "name")
    assert (await client.get("/api/v1/concepts/9999", headers=auth)).status_code == 404
    assert (await client.get(f"/api/v1/concepts/{ok.json()['id']}/export.csv", headers=auth)).status_code == 409
    no_examples = await client.post(f"/api/v1/concepts/{ok.json()['id']}/evaluate", headers=auth)
    assert (no_examples.status_code, no_examples.json()["field"]) == (422, "examples")
    assert (await client.get("/api/v1/concepts")).status_code == 401


async def test_apply_then_export_streams_every_match(client, auth, labelled_run) -> None:  # noqa: ANN001
    c = (await create(client, auth, labelled_run, name="probe", kind="probe", examples=CONFIRMED_VS_SUSPECTED)).json()
    resp = await client.post(f"/api/v1/concepts/{c['id']}/apply", headers=auth)
    assert resp.status_code == 202, resp.text
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}", timeout=60)
    assert job["status"] == "succeeded", job
    again = await client.post(f"/api/v1/concepts/{c['id']}/apply", headers=auth)
    assert again.json()["id"] == job["id"] and again.json()["status"] == "succeeded"  # the same work, not redone

    applied = (await client.get(f"/api/v1/concepts/{c['id']}", headers=auth)).json()["applied"]
    w = np.zeros(N_FEATURES)
    for weight in c["probe"]["weights"]:
        w[weight["index"]] = weight["weight"]
    p = 1 / (1 + np.exp(-(labelled_run.codes @ w + c["probe"]["intercept"])))
    want = np.flatnonzero(p >= 0.5)
    assert applied["n_matches"] == len(want) == job["result"]["n_matches"] and applied["n_documents"] == 400

    export = await client.get(applied["export_url"], headers=auth)
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
    assert "attachment" in export.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert list(rows[0]) == ["document_id", "external_id", "score", "matching_features", "labels", "metadata"]
    assert {int(r["document_id"]) for r in rows} == {labelled_run.doc_ids[i] for i in want}
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 0.5
    by_id = {int(r["document_id"]): r for r in rows}
    first = by_id[labelled_run.doc_ids[want[0]]]
    assert first["external_id"] == f"N{want[0]:04d}" and first["labels"] == labelled_run.labels[want[0]]
    assert json.loads(first["metadata"]) == {"ward": str(want[0] % 7)}
    positive_features = {x["index"] for x in c["probe"]["weights"] if x["weight"] > 0}
    for r in rows:
        named = [part.split(" ", 1)[0] for part in r["matching_features"].split("; ") if part]
        assert all(int(f[1:]) in positive_features for f in named)
    assert "visita" not in export.text  # never the document text


async def test_evaluate_on_other_examples(client, auth, labelled_run) -> None:  # noqa: ANN001
    expr = (await create(client, auth, labelled_run, name="e", kind="expression", expression="F0 > 0")).json()
    assert expr["metrics"] is None
    bronch = {"labels": {"positive": ["bronchiolitis:confirmed", "bronchiolitis:suspected"]}}
    m = (await client.post(f"/api/v1/concepts/{expr['id']}/evaluate", json={"examples": bronch}, headers=auth)).json()
    assert m["precision"] == m["recall"] == 1.0 and m["n_test"] == 100  # F0 is exactly "bronchiolitis"
    stored = (await client.get(f"/api/v1/concepts/{expr['id']}", headers=auth)).json()
    assert stored["metrics"]["f1"] == 1.0 and stored["examples"]["labels"]["positive"] == bronch["labels"]["positive"]

    probe = (await create(client, auth, labelled_run, name="p", kind="probe", examples=CONFIRMED_VS_SUSPECTED)).json()
    other = {"labels": {"positive": ["bronchiolitis:confirmed"], "negative": ["otitis:confirmed", "fever:confirmed"]}}
    m = (await client.post(f"/api/v1/concepts/{probe['id']}/evaluate", json={"examples": other}, headers=auth)).json()
    # every example it was not trained on: the 25 held-out confirmed notes and all 200 others
    assert m["n_test"] == 225 and m["n_train"] == 150
    kept = (await client.get(f"/api/v1/concepts/{probe['id']}", headers=auth)).json()
    assert kept["metrics"]["n_test"] == 50 and kept["examples"] == probe["examples"]  # its own figures unchanged
