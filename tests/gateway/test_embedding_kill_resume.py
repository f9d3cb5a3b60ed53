"""SIGKILL the process running an embedding job mid-run; the restarted process resumes it from
its shards: at most the shard in flight is recomputed, and the vectors equal an uninterrupted run's."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from tests.live import HTTP, create_key, live_server

pytestmark = pytest.mark.slow
N_DOCS, SHARD = 48, 4  # 12 shards: the kill lands mid-run


def notes_csv(path: Path) -> Path:
    words = "tosse febbre wheezing dispnea saturazione bronchiolite lattante aerosol".split()
    # 10,722 MiniLM tokens in all, the longest notes of two chunks (MiniLM reads 256 tokens); 20 + 5 i words were
    # 18,246 tokens, up to three chunks
    rows = [f"N{i}," + " ".join(words[(i + j) % len(words)] for j in range(10 + 3 * i)) for i in range(N_DOCS)]
    path.write_text("id,text\n" + "\n".join(rows) + "\n")
    return path


def start_run(url: str, key: str, csv: Path) -> tuple[dict, dict]:
    h = {"Authorization": f"Bearer {key}"}
    with csv.open("rb") as f:
        ds = HTTP.post(f"{url}/api/v1/datasets", headers=h, files={"file": ("n.csv", f)}).json()
    run = HTTP.post(f"{url}/api/v1/embedding-runs", headers=h, json={"dataset_id": ds["id"], "shard_size": SHARD},
                     timeout=120).json()
    return ds, run


def wait_done(url: str, key: str, run_id: int, timeout: float = 300) -> dict:
    h = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = HTTP.get(f"{url}/api/v1/embedding-runs/{run_id}", headers=h).json()
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.3)
    raise TimeoutError(run)


def vectors(data: Path, run: dict) -> np.ndarray:
    root = data / "artifacts"
    return np.concatenate([np.load(root / s["uri"].split("/artifacts/", 1)[1]) for s in run["result"]["shards"]])


def test_killed_server_resumes_embedding_run(tmp_path: Path) -> None:
    csv = notes_csv(tmp_path / "notes.csv")
    data = tmp_path / "data"
    with live_server(data) as (url, proc):
        key = create_key(data)
        # The reference: an uninterrupted run of the same notes, uploaded as a dataset of their own, so
        # that the killed run is another job with shards of its own (run 2), computed by the same model.
        ref_ds, ref_run = start_run(url, key, csv)
        reference = wait_done(url, key, ref_run["id"])
        assert reference["status"] == "succeeded"
        ds, run = start_run(url, key, csv)
        assert ds["id"] != ref_ds["id"] and run["id"] != ref_run["id"]
        shard_dir = data / "artifacts" / "embedding-runs" / str(run["id"]) / "embeddings"
        deadline = time.monotonic() + 120
        while len(list(shard_dir.glob("shard-*.npy"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done_at_kill = len(list(shard_dir.glob("shard-*.npy")))
    total_shards = N_DOCS // SHARD
    assert 2 <= done_at_kill < total_shards, "the kill must land mid-run"

    with live_server(data) as (url, _):  # the restarted process picks the job up by itself
        resumed = wait_done(url, key, run["id"])
    assert resumed["status"] == "succeeded", resumed
    result = resumed["result"]
    assert result["shards_reused"] >= done_at_kill
    assert result["shards_computed"] + result["shards_reused"] == total_shards
    # At most the shard in flight at the kill was computed twice.
    assert result["shards_computed"] <= total_shards - done_at_kill
    np.testing.assert_array_equal(vectors(data, resumed), vectors(data, reference))
