"""The whole pipeline on the multi-process deployment: import → embed → SAE → names (keywords),
over HTTP and the queues, each stage run by its own worker process."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import httpx
import pytest

from gateway.demo.corpus import generate_notes
from tests.distributed.conftest import N_NOTES
from tests.distributed.harness import Deployment

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]
N_NEW = 6


def import_dataset(dep: Deployment, csv: Path) -> dict:
    with csv.open("rb") as f:
        resp = dep.post("/api/v1/datasets", files={"file": ("notes.csv", f)}, data={"label_columns": "labels"})
    assert resp.status_code == 201, resp.text
    return resp.json()


def embed(dep: Deployment, dataset_id: int, **spec: object) -> dict:
    resp = dep.post("/api/v1/embedding-runs", json={"dataset_id": dataset_id, **spec})
    assert resp.status_code in (200, 202), resp.text
    return resp.json()


def test_pipeline_end_to_end(deployment: Deployment, baseline: dict, notes_csv: Path) -> None:
    """Import, embed and train come from the `baseline` fixture (shared with the fault tests)."""
    dep = deployment
    ds, run, sae = baseline["dataset"], baseline["embedding"], baseline["sae"]
    assert run["n_documents"] == ds["n_documents"] == N_NOTES
    assert sae["metrics"]["fvu"] < 1.0

    densest = dep.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=density&limit=12").json()["items"]
    resp = dep.post(f"/api/v1/sae-runs/{sae['id']}/interpretations",
                    json={"backends": [{"backend": "keywords"}], "features": [f["index"] for f in densest]})
    assert resp.status_code == 202, resp.text
    job = dep.wait_done(f"/api/v1/jobs/{resp.json()['id']}")
    assert job["status"] == "succeeded", job
    named = [f for f in dep.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=density&limit=12").json()["items"]
             if f["label"]]
    assert len(named) == job["result"]["n_named"] >= 8
    assert all(0 <= f["score"] <= 1 for f in named)

    # Each stage ran in its own worker process, off its own queue.
    for queue, function in (("embedder", "embed_run"), ("sae", "sae_train"), ("interpreter", "interpret_run")):
        assert function in dep.procs[f"{queue}-worker"].log_text(), f"{queue} worker never ran {function}"
    assert "job succeeded" in dep.procs["gateway-worker"].log_text()
    # Logs never hold document text.
    with notes_csv.open(newline="") as f:
        first_note = list(csv.DictReader(f))[0]["text"][:40]
    for proc in dep.procs.values():
        assert first_note not in proc.log_text(), f"{proc.name} logged document text"


def test_appended_notes_extend_the_run_across_the_workers(deployment: Deployment, baseline: dict) -> None:
    """Notes appended to the baseline's dataset (after the fault tests, which compare runs with it): the SAE run's
    extension job runs on the gateway worker, embeds the new notes through the embedder service, has the SAE
    worker recompute the statistics, and a new note sent as text then gets the codes its row now holds."""
    dep, sae = deployment, baseline["sae"]
    new = list(generate_notes(n=N_NEW, seed=12))
    buf = io.StringIO()
    csv.writer(buf).writerows([["id", "text"]] + [[f"added-{i}", note.text] for i, note in enumerate(new)])
    resp = dep.post(f"/api/v1/datasets/{baseline['dataset']['id']}/documents",
                    files={"file": ("more.csv", buf.getvalue().encode())})
    assert resp.status_code == 201, resp.text
    resp = dep.post(f"/api/v1/sae-runs/{sae['id']}/extend", json={"batch_documents": 2})
    assert resp.status_code == 202, resp.text
    job = dep.wait_done(f"/api/v1/jobs/{resp.json()['job_id']}")
    assert job["status"] == "succeeded" and job["result"]["batches"] == N_NEW // 2, job
    run = dep.get(f"/api/v1/sae-runs/{sae['id']}").json()
    assert run["coverage"]["encoded_documents"] == N_NOTES + N_NEW and run["coverage"]["not_encoded"] == 0
    assert "sae_extend" in dep.procs["gateway-worker"].log_text()
    assert "sae_restats" in dep.procs["sae-worker"].log_text()
    enc = dep.post(f"/api/v1/sae-runs/{sae['id']}/encode", json={"texts": [new[-1].text], "top": 256}).json()
    docs = dep.get(f"/api/v1/datasets/{baseline['dataset']['id']}/documents?offset={N_NOTES + N_NEW - 1}").json()
    stored = dep.get(f"/api/v1/sae-runs/{sae['id']}/documents/{docs['items'][0]['id']}").json()
    assert stored["position"] == N_NOTES + N_NEW - 1 and stored["features"]
    assert stored["n_active"] == enc["items"][0]["n_active"]
    encoded = {f["index"]: f["activation"] for f in enc["items"][0]["features"]}
    assert {f["index"]: encoded.get(f["index"]) for f in stored["features"]} == pytest.approx(
        {f["index"]: f["activation"] for f in stored["features"]}, rel=1e-4, abs=1e-5)


def test_gateway_processes_share_sessions(deployment: Deployment) -> None:
    """`prisma serve --workers 2`: two gateway processes on one port. A dashboard login made on
    one is honoured by the other (the session key is generated once and shared), whichever
    process each new connection reaches."""
    dep = deployment
    assert dep.procs["gateway"].log_text().count("Started server process") >= 2, "one gateway process only"
    for _ in range(8):  # a new connection per request (httpx.get: no pooled connection, no cookie jar):
        # the kernel spreads them over the processes
        form = httpx.get(f"{dep.url()}/login", timeout=30)
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1)
        login = httpx.post(f"{dep.url()}/login", cookies=form.cookies, timeout=30,
                           data={"key": dep.api_key, "csrf_token": token, "next": "/datasets"})
        assert login.status_code == 303, login.text[:300]
        for _ in range(3):
            page = httpx.get(f"{dep.url()}/datasets", cookies=login.cookies, timeout=30)
            assert page.status_code == 200 and "Datasets" in page.text
