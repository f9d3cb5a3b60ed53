"""The multi-process deployment, started once per test session (it takes a minute on two cores)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.demo.corpus import generate_notes
from tests.conftest import create_pg_database, drop_pg_database
from tests.distributed.harness import Deployment

N_NOTES = 72
SHARD = 6  # 12 shards: a kill lands mid-run
# Long enough to be killed mid-training (checkpoints every 25 steps), short on two shared cores.
SAE_CONFIG = {"expansion_factor": 2, "k": 8, "max_steps": 200, "batch_size": 32, "checkpoint_every_steps": 25}


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("distributed")
    url = create_pg_database()
    dep = Deployment(root=root, database_url=url, artifact_root=(root / "artifacts").as_uri())
    try:
        dep.start_all(gateway_workers=2)  # as deployed: one gateway process per core
        yield dep
    finally:
        dep.stop_all()
        drop_pg_database(url)


@pytest.fixture(scope="session")
def notes_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "notes.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "labels"])
        for note in generate_notes(n=N_NOTES, seed=11):
            w.writerow([note.id, note.text, "|".join(note.labels)])
    return path


@pytest.fixture(scope="session")
def baseline(deployment: Deployment, notes_csv: Path) -> dict:
    """An uninterrupted embedding run and SAE run of the corpus: what faulted runs must equal."""
    dep = deployment
    with notes_csv.open("rb") as f:
        ds = dep.post("/api/v1/datasets", files={"file": ("notes.csv", f)}, data={"label_columns": "labels"})
    assert ds.status_code == 201, ds.text
    run = dep.post("/api/v1/embedding-runs", json={"dataset_id": ds.json()["id"], "shard_size": SHARD})
    embedding = dep.wait_done(f"/api/v1/embedding-runs/{run.json()['id']}")
    assert embedding["status"] == "succeeded", dep.logs()
    # Checkpoints every 30 steps, not 25: a different job from the faulted run's, the same training.
    config = {**SAE_CONFIG, "checkpoint_every_steps": 30}
    resp = dep.post("/api/v1/sae-runs", json={"embedding_run_id": embedding["id"], "config": config})
    assert resp.status_code == 202, resp.text
    sae = dep.wait_done(f"/api/v1/sae-runs/{resp.json()[0]['id']}")
    assert sae["status"] == "succeeded", dep.logs()
    return {"dataset": ds.json(), "embedding": embedding, "sae": sae}
