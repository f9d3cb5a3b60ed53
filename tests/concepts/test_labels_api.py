"""A concept's label set over HTTP, on SQLite and PostgreSQL: the queue from a seed to the probe's uncertain
notes (leases, no labelled note twice), labels with history, undo and audit, roles (a labeller labels, a viewer
reads), every bad input a 4xx naming its field with nothing stored, import and export, and the probe retrained
on the labels naming them in its apply."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import update

from gateway.db import session_scope, utcnow
from gateway.domain.concepts.readout import f1_of, readout_probability
from gateway.domain.auth import accounts
from gateway.domain.auth import repo as auth_repo
from gateway.domain.auth.service import create_key
from gateway.domain.datasets.models import Dataset
from gateway.domain.labels.models import LabelLease
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio
SEED = {"expression": 'label:"bronchiolite" > 1'}


def truth(run, position: int) -> str:  # noqa: ANN001
    return "positive" if run.labels[position] == "bronchiolitis:confirmed" else "negative"


async def new_concept(client, auth, run, name: str = "confirmed (labelled)", **extra):  # noqa: ANN001, ANN201
    resp = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run.run_id, "name": name, "kind": "probe", "seed": SEED, **extra})
    assert resp.status_code == 201, resp.text
    return resp.json()


def member_key(app, dataset_id: int, role: str) -> dict[str, str]:  # noqa: ANN001
    """A key of a user of `role` in the dataset's project."""
    with session_scope(app.state.factory) as session:
        project_id = session.get(Dataset, dataset_id).project_id
        user = accounts.create_user(session, name=f"u-{role}", role=role)
        auth_repo.add_membership(session, user_id=user.id, project_id=project_id)
        return {"Authorization": f"Bearer {create_key(session, name=f'k-{role}', user=user)[1]}"}


async def answer(client, headers, concept_id: int, batch: dict, run) -> None:  # noqa: ANN001
    for item in batch["items"]:
        resp = await client.put(f"/api/v1/concepts/{concept_id}/labels/{item['document_id']}", headers=headers,
                                json={"label": truth(run, item["position"]), "lease_id": item["lease_id"]})
        assert resp.status_code == 200, resp.text


async def test_from_a_seed_to_a_trained_probe(client, auth, labelled_run) -> None:  # noqa: ANN001
    run = labelled_run
    concept = await new_concept(client, auth, run)
    assert concept["probe"] is None and concept["seed"] == {**SEED, "text": None} and concept["labelling"]["version"] == 0
    seen: set[int] = set()
    first = (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=auth, json={"n": 10})).json()
    assert first["phase"] == "seed" and len(first["items"]) == 10 and first["policy"]["seed"] == SEED
    reasons = [i["reason"] for i in first["items"]]
    assert reasons.count("random") == 5 and reasons.count("near_miss") == 2 and reasons.count("seed") == 3
    dense = run.codes.toarray()
    for item in first["items"]:  # hits: F0 (named bronchiolite) above 1; near misses: F0 fires below the cut
        f0 = dense[item["position"], 0]
        assert {"seed": f0 > 1, "near_miss": 0 < f0 <= 1, "random": True}[item["reason"]], (item, f0)
    for _ in range(5):
        batch = (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=auth, json={"n": 10})).json() \
            if seen else first
        positions = {i["position"] for i in batch["items"]}
        assert not positions & seen  # a labelled note never comes back
        seen |= positions
        await answer(client, auth, concept["id"], batch, run)
    listed = (await client.get(f"/api/v1/concepts/{concept['id']}/labels", headers=auth)).json()
    assert listed["total"] == 50 and listed["counts"]["positive"] + listed["counts"]["negative"] == 50
    assert listed["counts"]["random"] == 25 and {i["source"] for i in listed["items"]} == {"queue"}
    shown = (await client.get(f"/api/v1/concepts/{concept['id']}", headers=auth)).json()  # retrained in background
    labelling = shown["labelling"]
    assert labelling["trained_on"]["count"] == 50 and not labelling["stale"] and shown["probe"]["readout"] == labelling["readout"]
    probe = shown["probe"]
    coef = np.zeros(run.codes.shape[1])
    for w in probe["weights"]:
        coef[w["index"]] = w["weight"]
    predicted = readout_probability(coef, probe["intercept"], run.codes, probe["readout"]) >= 0.5
    y = np.array([truth(run, p) == "positive" for p in range(len(run.labels))])
    unseen = np.array([p not in seen for p in range(len(y))])
    assert f1_of(y[unseen], predicted[unseen]) > 0.7  # on the notes nobody labelled
    e = labelling["estimate"]  # from the 25 random labels and the probe's own predictions over the unlabelled notes
    assert e["basis"] == "random" and e["n"] == 25 and e["low"] <= e["f1"] <= e["high"]
    assert e["low"] <= f1_of(y[unseen], predicted[unseen]) <= e["high"]
    assert labelling["estimate_cv"]["basis"] == "cross_validation" and labelling["estimate_cv"]["n"] == 50
    assert [p["labels"] for p in labelling["curve"]] == [10, 25, 50][-len(labelling["curve"]):]
    assert labelling["carriers"][0]["label"] == "bronchiolite"  # F0 carries confirmed (suspected is F1: negative)
    probe_batch = (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=auth, json={"n": 10})).json()
    assert probe_batch["phase"] == "probe" and probe_batch["policy"]["probe_version"] == labelling["version"]
    assert {i["reason"] for i in probe_batch["items"]} == {"uncertain", "random"}
    assert all(i["probability"] is not None for i in probe_batch["items"])
    assert not {i["position"] for i in probe_batch["items"]} & seen


async def test_leases_keep_two_labellers_apart_and_expire(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    concept = await new_concept(client, auth, labelled_run)
    labeller = member_key(app, labelled_run.dataset_id, "labeller")
    mine = (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=auth, json={"n": 20})).json()
    theirs = (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=labeller, json={"n": 20})).json()
    assert not {i["document_id"] for i in mine["items"]} & {i["document_id"] for i in theirs["items"]}
    item = mine["items"][0]
    with session_scope(app.state.factory) as session:  # the lease runs out
        session.execute(update(LabelLease).where(LabelLease.id == item["lease_id"])
                        .values(expires_at=utcnow() - timedelta(minutes=1)))
    url = f"/api/v1/concepts/{concept['id']}/labels/{item['document_id']}"
    late = await client.put(url, headers=auth, json={"label": "positive", "lease_id": item["lease_id"]})
    assert late.status_code == 409 and late.json()["field"] == "lease_id" and "expired" in late.json()["detail"]
    wrong = await client.put(url, headers=auth, json={"label": "positive", "lease_id": theirs["items"][0]["lease_id"]})
    assert wrong.status_code == 409 and wrong.json()["field"] == "lease_id"
    assert (await client.get(f"/api/v1/concepts/{concept['id']}/labels", headers=auth)).json()["total"] == 0


async def test_last_write_wins_with_history_undo_and_audit(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    concept = await new_concept(client, auth, labelled_run)
    labeller = member_key(app, labelled_run.dataset_id, "labeller")
    doc = labelled_run.doc_ids[3]
    url = f"/api/v1/concepts/{concept['id']}/labels/{doc}"
    assert (await client.put(url, headers=auth, json={"label": "positive"})).status_code == 200
    second = await client.put(url, headers=labeller, json={"label": "negative"})
    assert second.status_code == 200 and second.json()["set_by"] == "k-labeller"
    detail = (await client.get(url, headers=auth)).json()
    assert detail["label"] == "negative"
    assert [(e["action"], e["previous"], e["label"]) for e in detail["history"]] == [
        ("set", None, "positive"), ("set", "positive", "negative")]
    undone = await client.post(f"{url}/undo", headers=labeller)
    assert undone.status_code == 200 and undone.json()["label"] == "positive"
    assert (await client.post(f"{url}/undo", headers=labeller)).json()["label"] == "negative"  # undo of an undo
    assert (await client.delete(url, headers=labeller)).status_code == 204
    assert (await client.post(f"{url}/undo", headers=labeller)).json()["label"] == "negative"
    events = (await client.get("/api/v1/audit-events", headers=auth, params={"action": "label.set"})).json()
    assert len(events) == 2 and events[0]["actor"] == "k-labeller" != events[1]["actor"]  # newest first
    assert all(e["details"]["document_id"] == doc and e["target_id"] == str(labelled_run.dataset_id) for e in events)
    undo_events = (await client.get("/api/v1/audit-events", headers=auth, params={"action": "label.undo"})).json()
    assert len(undo_events) == 3 and "visita" not in json.dumps(events + undo_events)


async def test_roles_a_labeller_labels_a_viewer_reads(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    concept = await new_concept(client, auth, labelled_run)
    viewer, labeller = (member_key(app, labelled_run.dataset_id, r) for r in ("viewer", "labeller"))
    url = f"/api/v1/concepts/{concept['id']}/labels/{labelled_run.doc_ids[0]}"
    refused = await client.put(url, headers=viewer, json={"label": "positive"})
    assert refused.status_code == 403 and "labeller" in refused.json()["detail"]
    assert (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=viewer)).status_code == 403
    assert (await client.put(url, headers=labeller, json={"label": "positive"})).status_code == 200
    assert (await client.get(url, headers=viewer)).json()["label"] == "positive"
    made = await client.post("/api/v1/concepts", headers=labeller, json={
        "sae_run_id": labelled_run.run_id, "name": "x", "kind": "probe"})
    assert made.status_code == 403  # a labeller labels; creating needs an editor
    with session_scope(app.state.factory) as session:
        outsider = accounts.create_user(session, name="u-out", role="editor")
        other = {"Authorization": f"Bearer {create_key(session, name='k-out', user=outsider)[1]}"}
    assert (await client.put(url, headers=other, json={"label": "negative"})).status_code == 404


async def test_every_bad_input_is_a_4xx_and_stores_nothing(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    concept = await new_concept(client, auth, labelled_run)
    base = f"/api/v1/concepts/{concept['id']}"
    other = (await client.post("/api/v1/datasets", headers=auth, files={
        "file": ("x.csv", b"id,text\nZ1,another note\n")})).json()
    other_doc = (await client.get(f"/api/v1/datasets/{other['id']}/documents", headers=auth)).json()["items"][0]["id"]
    cases = [
        ("put", f"{base}/labels/{other_doc}", {"label": "positive"}, 404, "document_id"),
        ("put", f"{base}/labels/{labelled_run.doc_ids[0]}", {"label": "maybe"}, 422, None),
        ("put", f"{base}/labels/{labelled_run.doc_ids[0]}", {"label": "positive", "lease_id": 999999}, 409, "lease_id"),
        ("delete", f"{base}/labels/{labelled_run.doc_ids[0]}", None, 404, "document_id"),
        ("post", f"{base}/labels/{labelled_run.doc_ids[0]}/undo", None, 409, "document_id"),
        ("post", f"{base}/queue", {"n": 0}, 422, None),
        ("post", f"{base}/queue", {"seed": {"expression": "F0 >"}}, 422, "expression"),
        ("post", "/api/v1/concepts/999999/queue", {"n": 1}, 404, None),
    ]
    for method, url, body, code, field in cases:
        resp = await getattr(client, method)(url, headers=auth, **({"json": body} if body is not None else {}))
        assert resp.status_code == code, (url, body, resp.text)
        if field is not None:
            assert field in resp.json()["field"], resp.text
    bad_label = await client.put(f"{base}/labels/{labelled_run.doc_ids[0]}", headers=auth, json={"label": "maybe"})
    assert "label" in json.dumps(bad_label.json()["detail"])
    assert (await client.get(f"{base}/labels", headers=auth)).json()["total"] == 0
    expression = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": labelled_run.run_id, "name": "expr", "kind": "expression", "expression": "F0 > 0"})
    refused = await client.post(f"/api/v1/concepts/{expression.json()['id']}/queue", headers=auth)
    assert refused.status_code == 409 and "expression" in refused.json()["detail"]


async def test_queue_without_a_trained_sae_run_says_so(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    from gateway.domain.runs.models import SaeRun

    concept = await new_concept(client, auth, labelled_run)
    with session_scope(app.state.factory) as session:
        session.execute(update(SaeRun).where(SaeRun.id == labelled_run.run_id).values(status="running", result=None))
    from gateway.search.space import clear_cache

    clear_cache()
    resp = await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=auth, json={"n": 5})
    assert resp.status_code == 409 and resp.json()["field"] == "concept_id"


async def test_import_export_round_trip(client, auth, labelled_run) -> None:  # noqa: ANN001
    concept = await new_concept(client, auth, labelled_run)
    rows = [(f"N{i:04d}", truth(labelled_run, i)) for i in range(0, 120, 3)] + [("N0001", "skip")]
    body = "external_id,label\n" + "".join(f"{e},{lab}\n" for e, lab in rows)
    done = await client.post(f"/api/v1/concepts/{concept['id']}/labels/import", headers=auth, content=body.encode())
    assert done.status_code == 200 and done.json() == {"imported": len(rows), "unchanged": 0}
    again = await client.post(f"/api/v1/concepts/{concept['id']}/labels/import", headers=auth, content=body.encode())
    assert again.json() == {"imported": 0, "unchanged": len(rows)}
    exported = await client.get(f"/api/v1/concepts/{concept['id']}/labels/export", headers=auth)
    table = list(csv.DictReader(io.StringIO(exported.text)))
    assert sorted((r["external_id"], r["label"]) for r in table) == sorted(rows)
    assert {r["source"] for r in table} == {"import"} and all(r["set_by"] and r["set_at"] for r in table)
    jsonl = await client.get(f"/api/v1/concepts/{concept['id']}/labels/export", headers=auth,
                             params={"format": "jsonl"})
    copy = await new_concept(client, auth, labelled_run, name="copy")
    moved = await client.post(f"/api/v1/concepts/{copy['id']}/labels/import", headers=auth,
                              params={"format": "jsonl"}, content=jsonl.content)
    assert moved.json()["imported"] == len(rows)
    bad = "external_id,label\nN0002,positive\nNOPE,negative\n"
    refused = await client.post(f"/api/v1/concepts/{copy['id']}/labels/import", headers=auth, content=bad.encode())
    assert refused.status_code == 422 and refused.json()["field"] == "line 3" and "NOPE" in refused.json()["detail"]
    no_column = await client.post(f"/api/v1/concepts/{copy['id']}/labels/import", headers=auth,
                                  content=b"id,label\nN0002,positive\n")
    assert no_column.status_code == 422 and "external_id" in no_column.json()["detail"]
    not_utf8 = await client.post(f"/api/v1/concepts/{copy['id']}/labels/import", headers=auth,
                                 content=b"external_id,label\n\xff\xfe,positive\n")
    assert not_utf8.status_code == 422 and not_utf8.json()["field"] == "body"
    total = (await client.get(f"/api/v1/concepts/{copy['id']}/labels", headers=auth)).json()["total"]
    assert total == len(rows)  # the refused imports stored nothing


async def test_examples_become_the_label_set_and_apply_names_the_training_labels(client, auth,  # noqa: ANN001
                                                                                   labelled_run) -> None:
    made = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": labelled_run.run_id, "name": "from labels", "kind": "probe",
        "examples": {"labels": {"positive": ["bronchiolitis:confirmed"], "negative": ["bronchiolitis:suspected"]}}})
    assert made.status_code == 201, made.text
    listed = (await client.get(f"/api/v1/concepts/{made.json()['id']}/labels?limit=500", headers=auth)).json()
    assert listed["counts"]["positive"] == listed["counts"]["negative"] == 100
    assert {i["source"] for i in listed["items"]} == {"examples"}
    concept = await new_concept(client, auth, labelled_run, name="trained on labels")
    for p in range(0, 300, 3):
        await client.put(f"/api/v1/concepts/{concept['id']}/labels/{labelled_run.doc_ids[p]}", headers=auth,
                         json={"label": truth(labelled_run, p)})
    retrained = await client.post(f"/api/v1/concepts/{concept['id']}/retrain", headers=auth)
    assert retrained.status_code == 200 and retrained.json()["trained_on"]["count"] == 100
    job = await client.post(f"/api/v1/concepts/{concept['id']}/apply", headers=auth)
    assert job.status_code == 202, job.text
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job.json()['id']}", timeout=60))["status"] == "succeeded"
    shown = (await client.get(f"/api/v1/concepts/{concept['id']}", headers=auth)).json()
    assert shown["applied"]["trained_on"]["hash"] == retrained.json()["trained_on"]["hash"]
    exported = await client.get(f"/api/v1/concepts/{concept['id']}/export.csv", headers=auth)
    assert exported.headers["x-training-labels"] == f"count=100; sha256={retrained.json()['trained_on']['hash']}"
