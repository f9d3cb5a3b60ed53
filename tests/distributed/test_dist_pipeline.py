"""The whole pipeline on the multi-process deployment: import → embed → SAE → names (keywords),
over HTTP and the queues, each stage run by its own worker process."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.distributed.conftest import N_NOTES
from tests.distributed.harness import Deployment

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


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
