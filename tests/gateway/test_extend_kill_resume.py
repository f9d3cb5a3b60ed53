"""SIGKILL the process extending an SAE run to appended notes, between batches; the restarted process resumes the
job from its checkpointed batches (those written are not redone) and the run ends with the codes an uninterrupted
encoding gives the new notes (POST /sae-runs/{id}/encode: the path the extension calls, batch by batch)."""

from __future__ import annotations

import csv
import io
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.demo.corpus import generate_notes
from tests.gateway.shared_runs import SMALL
from tests.live import HTTP, create_key, live_server

pytestmark = pytest.mark.slow
N_OLD, N_NEW, BATCH = 20, 16, 2  # 8 batches: the kill lands mid-job


def csv_bytes(notes) -> bytes:  # noqa: ANN001
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows([n.id, n.text] for n in notes)
    return buf.getvalue().encode()


def wait(url: str, h: dict, path: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = HTTP.get(f"{url}{path}", headers=h).json()
        if obj["status"] in ("succeeded", "failed", "cancelled"):
            assert obj["status"] == "succeeded", obj
            return obj
        time.sleep(0.3)
    raise TimeoutError(path)


def codes(folder: Path) -> sp.csr_matrix:
    return sp.load_npz(folder / "codes.csr.npz").tocsr()


def test_killed_server_resumes_the_extension(tmp_path: Path) -> None:
    data = tmp_path / "data"
    new = [replace(n, id=f"new-{i}") for i, n in enumerate(generate_notes(n=N_NEW, seed=41))]
    with live_server(data) as (url, proc):
        h = {"Authorization": f"Bearer {create_key(data)}"}
        ds = HTTP.post(f"{url}/api/v1/datasets", headers=h,
                       files={"file": ("o.csv", csv_bytes(generate_notes(n=N_OLD, seed=40)))}).json()["id"]
        emb = HTTP.post(f"{url}/api/v1/embedding-runs", headers=h, timeout=120,  # fp32: exact in any batch
                           json={"dataset_id": ds, "precision": "fp32"}).json()
        wait(url, h, f"/api/v1/embedding-runs/{emb['id']}")
        run_id = HTTP.post(f"{url}/api/v1/sae-runs", headers=h,
                           json={"embedding_run_id": emb["id"], "config": SMALL}).json()[0]["id"]
        wait(url, h, f"/api/v1/sae-runs/{run_id}")
        before = codes(data / "artifacts" / "sae-runs" / str(run_id))
        resp = HTTP.post(f"{url}/api/v1/datasets/{ds}/documents", headers=h, files={"file": ("n.csv", csv_bytes(new))})
        assert resp.status_code == 201, resp.text
        job = HTTP.post(f"{url}/api/v1/sae-runs/{run_id}/extend", headers=h, json={"batch_documents": BATCH}).json()
        folder = data / "artifacts" / "sae-runs" / str(run_id) / f"extend-{N_OLD + N_NEW}"
        deadline = time.monotonic() + 120
        while not (folder / "batch-00001.npz").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    written = sorted(folder.glob("batch-*.npz"))
    assert not (folder / "codes.csr.npz").exists()
    assert 2 <= len(written) < N_NEW // BATCH, "the kill must land between batches, mid-job"
    mtimes = {p.name: p.stat().st_mtime_ns for p in written}

    with live_server(data) as (url, _):  # the restarted process picks the job up by itself
        done = wait(url, h, f"/api/v1/jobs/{job['job_id']}")
        run = wait(url, h, f"/api/v1/sae-runs/{run_id}")
        enc = HTTP.post(f"{url}/api/v1/sae-runs/{run_id}/encode", headers=h,
                        json={"texts": [n.text for n in new], "top": 256}, timeout=120).json()
    assert done["attempts"] == 2 and done["result"]["batches"] == N_NEW // BATCH
    assert {p.name: p.stat().st_mtime_ns for p in written} == mtimes  # the batches written before are not redone
    assert run["coverage"]["encoded_documents"] == N_OLD + N_NEW and run["coverage"]["not_encoded"] == 0
    after = codes(folder)  # the extension's own codes, which the run now names
    assert after.shape[0] == N_OLD + N_NEW
    assert (after[:N_OLD] != before).nnz == 0
    for i, item in enumerate(enc["items"]):
        row = after[N_OLD + i].toarray().ravel()
        assert int(np.count_nonzero(row)) == item["n_active"], i
        shown = {f["index"]: f["activation"] for f in item["features"]}
        assert {j: float(row[j]) for j in shown} == pytest.approx(shown, rel=1e-4, abs=1e-5), i
