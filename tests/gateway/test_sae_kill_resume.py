"""SIGKILL the process training an SAE; the restarted process resumes from the last checkpoint and
finishes with the metrics of an uninterrupted run (resume is exact: same steps, same data order)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from gateway.demo.corpus import write_csv
from tests.live import HTTP, create_key, import_random_vectors, live_server

pytestmark = pytest.mark.slow
N_NOTES = 150
CONFIG = {"expansion_factor": 2, "k": 8, "max_steps": 300, "batch_size": 32, "checkpoint_every_steps": 25}


def embedding_run(url: str, h: dict, corpus: Path, n: int) -> int:
    """The corpus uploaded, with vectors imported: what is tested is the SAE's training, not embedding."""
    with corpus.open("rb") as f:
        ds = HTTP.post(f"{url}/api/v1/datasets", headers=h, files={"file": ("c.csv", f)}).json()
    return import_random_vectors(HTTP, url, h, ds["id"], n)["id"]


def wait(url: str, h: dict, path: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = HTTP.get(f"{url}{path}", headers=h).json()
        if obj["status"] in ("succeeded", "failed", "cancelled"):
            assert obj["status"] == "succeeded", obj
            return obj
        time.sleep(0.3)
    raise TimeoutError(path)


def train(url: str, h: dict, emb_id: int, config: dict) -> int:
    return HTTP.post(f"{url}/api/v1/sae-runs", headers=h, json={"embedding_run_id": emb_id, "config": config}).json()[0]["id"]


def test_killed_server_resumes_sae_training(tmp_path: Path) -> None:
    corpus = write_csv(tmp_path / "c.csv", n=N_NOTES, seed=6)
    data = tmp_path / "data"
    with live_server(data) as (url, proc):
        h = {"Authorization": f"Bearer {create_key(data)}"}
        emb_id = embedding_run(url, h, corpus, N_NOTES)  # once: both SAE runs train on it
        # Checkpoints every 30 steps, not 25: another job than the killed run's, the same training.
        reference = wait(url, h, f"/api/v1/sae-runs/{train(url, h, emb_id, {**CONFIG, 'checkpoint_every_steps': 30})}")
        run_id = train(url, h, emb_id, CONFIG)
        run_dir = data / "artifacts" / "sae-runs" / str(run_id)
        latest = run_dir / "checkpoint" / "latest.json"
        deadline = time.monotonic() + 120
        while not latest.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert latest.exists(), "the kill must land after a checkpoint"
    assert not (run_dir / "result.json").exists(), "the kill must land mid-run"

    with live_server(data) as (url, _):
        resumed = wait(url, h, f"/api/v1/sae-runs/{run_id}")
        job = HTTP.get(f"{url}/api/v1/jobs/{resumed['job_id']}", headers=h).json()
    assert job["attempts"] == 2
    assert resumed["loss_curve"][-1]["step"] == CONFIG["max_steps"]
    for key in ("fvu", "explained_variance", "dead_fraction", "l0"):
        assert resumed["metrics"][key] == pytest.approx(reference["metrics"][key], rel=1e-4, abs=1e-6), key
