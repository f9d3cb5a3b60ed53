"""Faults on the multi-process deployment: workers SIGKILLed mid-job, two workers on one run,
Redis and PostgreSQL restarted mid-job, a service app down. Each test leaves the deployment whole."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from tests.distributed.conftest import SAE_CONFIG, SHARD
from tests.distributed.harness import Deployment, wait_until
from tests.distributed.test_dist_pipeline import embed, import_dataset

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


def artifacts_dir(dep: Deployment) -> Path:
    return Path(dep.artifact_root.removeprefix("file://"))


def shard_files(dep: Deployment, run_id: int) -> list[Path]:
    return sorted((artifacts_dir(dep) / "embedding-runs" / str(run_id) / "embeddings").glob("shard-*.npy"))


def vectors(dep: Deployment, run: dict) -> np.ndarray:
    root = artifacts_dir(dep)
    return np.concatenate([np.load(root / s["uri"].split(dep.artifact_root + "/", 1)[1])
                           for s in run["result"]["shards"]])


def computed_shards(dep: Deployment, run_id: int) -> dict[str, list[int]]:
    """Per embedder worker process, the shards of `run_id` it computed (from its log)."""
    pattern = re.compile(rf"embedding run {run_id}: shard (\d+) computed")
    return {name: [int(m) for m in pattern.findall(proc.log_text())]
            for name, proc in dep.procs.items() if name.startswith("embedder-worker")}


def start_embedding(dep: Deployment, csv: Path) -> dict:
    return embed(dep, import_dataset(dep, csv)["id"], shard_size=SHARD)


def wait_for(paths_fn, at_least: int, timeout: float = 120) -> None:  # noqa: ANN001
    wait_until(lambda: len(paths_fn()) >= at_least, timeout, f"{at_least} files", interval=0.02)


def db_rows(dep: Deployment, sql: str, **params: object) -> list[tuple]:
    engine = create_engine(dep.database_url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def no_duplicate_artifacts(dep: Deployment, run_id: int, n_shards: int) -> None:
    rows = db_rows(dep, "SELECT uri, count(*) FROM artifacts WHERE owner_type = 'embedding_run' AND owner_id = :i "
                        "GROUP BY uri", i=run_id)
    assert all(count == 1 for _, count in rows), [r for r in rows if r[1] > 1]
    assert sum("/embeddings/shard-" in uri for uri, _ in rows) == n_shards


def test_sigkill_embedder_worker_resumes_from_its_shards(deployment: Deployment, baseline: dict,
                                                         notes_csv: Path) -> None:
    dep, reference = deployment, baseline["embedding"]
    total = len(reference["result"]["shards"])

    run = start_embedding(dep, notes_csv)
    wait_for(lambda: shard_files(dep, run["id"]), 2)
    dep.procs["embedder-worker"].kill()
    on_disk = {int(p.stem.split("-")[1]) for p in shard_files(dep, run["id"])}  # shard-00003.npy -> 3
    done_at_kill = len(on_disk)
    assert 2 <= done_at_kill < total, "the kill must land mid-run"
    dep.start_worker("embedder")
    resumed = dep.wait_done(f"/api/v1/embedding-runs/{run['id']}")

    assert resumed["status"] == "succeeded", dep.logs()
    np.testing.assert_array_equal(vectors(dep, resumed), vectors(dep, reference))
    computed = [i for shards in computed_shards(dep, run["id"]).values() for i in shards]
    # Every shard was computed by a worker; one the kill caught between its file and its log line
    # ("shard N computed") is on disk without the line, and the resumed worker reuses it.
    assert set(range(total)) - set(computed) <= on_disk
    assert set(computed) - on_disk == set(range(total)) - on_disk, "the resumed worker computes every missing shard"
    assert len(computed) <= total + 1, "at most the shard in flight is computed twice"
    no_duplicate_artifacts(dep, run["id"], total)


def test_two_embedder_workers_share_a_run(deployment: Deployment, notes_csv: Path) -> None:
    dep = deployment
    second = dep.start_worker("embedder", suffix="-2")
    try:
        dep.wait_worker_ready(second)
        run = dep.wait_done(f"/api/v1/embedding-runs/{start_embedding(dep, notes_csv)['id']}")
    finally:
        second.stop()
    assert run["status"] == "succeeded", dep.logs()
    total = len(run["result"]["shards"])
    per_worker = computed_shards(dep, run["id"])
    assert all(per_worker.values()) and len(per_worker) == 2, f"both workers took shards: {per_worker}"
    everything = [i for shards in per_worker.values() for i in shards]
    assert sorted(everything) == list(range(total)), f"each shard computed once: {per_worker}"
    no_duplicate_artifacts(dep, run["id"], total)


def sae_run(dep: Deployment, embedding_run_id: int) -> int:
    resp = dep.post("/api/v1/sae-runs", json={"embedding_run_id": embedding_run_id, "config": SAE_CONFIG})
    assert resp.status_code == 202, resp.text
    return resp.json()[0]["id"]


def test_sigkill_sae_worker_resumes_from_its_checkpoint(deployment: Deployment, baseline: dict) -> None:
    dep, emb, reference = deployment, baseline["embedding"], baseline["sae"]
    run_id = sae_run(dep, emb["id"])
    folder = artifacts_dir(dep) / "sae-runs" / str(run_id)
    wait_for(lambda: list(folder.glob("checkpoint/latest.json")), 1)
    dep.procs["sae-worker"].kill()
    assert not (folder / "result.json").exists(), "the kill must land mid-run"
    latest = json.loads((folder / "checkpoint" / "latest.json").read_text())["folder"]
    step_at_kill = int(latest.rsplit("step-", 1)[1])
    dep.start_worker("sae")
    resumed = dep.wait_done(f"/api/v1/sae-runs/{run_id}")

    assert resumed["status"] == "succeeded", dep.logs()
    assert 0 < step_at_kill < SAE_CONFIG["max_steps"]
    assert resumed["loss_curve"][-1]["step"] == SAE_CONFIG["max_steps"]
    for key in ("fvu", "explained_variance", "dead_fraction", "l0"):
        assert resumed["metrics"][key] == pytest.approx(reference["metrics"][key], rel=1e-4, abs=1e-6), key


def test_redis_restart_mid_job(deployment: Deployment, notes_csv: Path) -> None:
    dep = deployment
    alive = [p for p in dep.procs.values() if p.alive]
    run = start_embedding(dep, notes_csv)
    wait_for(lambda: shard_files(dep, run["id"]), 1)
    dep.restart_redis(down_s=1.5)
    done = dep.wait_done(f"/api/v1/embedding-runs/{run['id']}")
    assert done["status"] == "succeeded", dep.logs()
    no_duplicate_artifacts(dep, run["id"], len(done["result"]["shards"]))
    jobs = db_rows(dep, "SELECT count(*) FROM jobs WHERE id = :j", j=done["job_id"])
    assert jobs == [(1,)]
    assert all(p.alive for p in alive), "every process lived through it"


def pg_ctl(action: str) -> None:
    version = subprocess.run(["ls", "/etc/postgresql"], capture_output=True, text=True).stdout.split()[0]
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action], check=True,
                   capture_output=True)


def test_postgres_restart_mid_job(deployment: Deployment, notes_csv: Path) -> None:
    dep = deployment
    ds = import_dataset(dep, notes_csv)
    run = embed(dep, ds["id"], shard_size=SHARD)
    wait_for(lambda: shard_files(dep, run["id"]), 1)
    statuses: list[tuple[int, str]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            resp = dep.get(f"/api/v1/datasets/{ds['id']}")
            statuses.append((resp.status_code, resp.text))
            time.sleep(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    finished = re.compile(rf"embedding run {run['id']}: \d+ documents, \d+ shards computed")
    try:
        pg_ctl("stop")
        time.sleep(2.0)
        # down until the embedder has finished the run and the gateway's worker has met the outage at the job's
        # end (where a job once stayed `running` for good): it must run the job again once the database is back
        wait_until(lambda: finished.search(dep.procs["embedder-worker"].log_text()), 120, "the embedder finishes")
        wait_until(lambda: "database unavailable: job retried" in dep.procs["gateway-worker"].log_text(), 60,
                   "the gateway worker retries")
    finally:
        pg_ctl("start")
        wait_until(lambda: dep.get(f"/api/v1/datasets/{ds['id']}").status_code == 200, 60, "gateway recovers")
        stop.set()
        poller.join()

    down = [body for status, body in statuses if status == 503]
    assert down and all(json.loads(b)["field"] == "database" for b in down), "503 naming the database while down"
    assert {status for status, _ in statuses} <= {200, 503}, "never a 500"
    done = dep.wait_done(f"/api/v1/embedding-runs/{run['id']}")
    assert done["status"] == "succeeded", dep.logs()
    assert dep.get(f"/api/v1/datasets/{ds['id']}").json()["n_documents"] == ds["n_documents"]
    no_duplicate_artifacts(dep, run["id"], len(done["result"]["shards"]))
    assert dep.procs["gateway"].alive, "recovered without a restart of its own"


def test_service_app_down_is_a_503_naming_it(deployment: Deployment, notes_csv: Path) -> None:
    dep = deployment
    ds = import_dataset(dep, notes_csv)
    dep.procs["embedder"].stop()
    try:
        resp = dep.post("/api/v1/embedding-runs", json={"dataset_id": ds["id"], "shard_size": 5})
    finally:
        dep.start_service("embedder")
        dep.wait_healthy("embedder")
    assert resp.status_code == 503, resp.text
    assert resp.json()["field"] == "embedder" and "embedder service is unavailable" in resp.json()["detail"]


def test_redis_down_is_a_503_naming_the_queue(deployment: Deployment, baseline: dict) -> None:
    dep = deployment
    subprocess.run(["redis-cli", "-p", str(dep.redis_port), "shutdown"], capture_output=True)
    dep.procs["redis"].popen.wait(timeout=20)
    try:
        resp = dep.post(f"/api/v1/sae-runs/{baseline['sae']['id']}/interpretations",
                        json={"backends": [{"backend": "keywords"}], "features": [0]})
    finally:
        dep.procs["redis"].start()
        wait_until(dep.redis_ping, 20, "redis after restart")
    assert resp.status_code == 503, resp.text
    assert resp.json()["field"] == "queue"


def test_many_concurrent_searches_do_not_starve_the_database_pool(deployment: Deployment, baseline: dict) -> None:
    """60 at once (more than the pool's 48 connections, each request wanting two): all answered."""
    import asyncio

    import httpx

    dep, sae_id = deployment, baseline["sae"]["id"]
    body = {"mode": "expression", "expression": "F0 > 0 OR F1 > 0", "limit": 5}

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=60)
        async with httpx.AsyncClient(base_url=dep.url(), headers=dep.headers(), timeout=60, limits=limits) as c:
            answers = await asyncio.gather(*(c.post(f"/api/v1/sae-runs/{sae_id}/search", json=body)
                                             for _ in range(60)))
        return [a.status_code for a in answers]

    assert asyncio.run(burst()) == [200] * 60
