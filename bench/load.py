"""Load on the multi-process deployment, and embedder scaling.

The deployment is the one the distributed tests start (tests/distributed/harness.py): the
gateway, each service's app and each queue's worker as separate processes, on PostgreSQL (a
fresh database) and a Redis server of its own. Medical Abstracts (read in place) are imported
twice and embedded once with one embedder worker, once with two (same documents, same spec):
the scaling ratio is the first wall time over the second. An SAE is trained on the first run,
its features named (keywords), and then `--clients` concurrent clients send search requests for
`--seconds`: feature expressions, label search, text search (query embedded and encoded by the
embedder and SAE services) and the feature list filtered by text. Goals: 0 errors, p99 < 200 ms.

    python bench/load.py [--limit 600] [--clients 50] [--seconds 60]

Writes bench/results/load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tests.conftest import create_pg_database, drop_pg_database
from tests.distributed.harness import Deployment

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "medical-abstracts" / "medical_tc_test.csv"
SHARD = 64
SAE = {"expansion_factor": 4, "k": 16, "max_steps": 400, "batch_size": 64, "checkpoint_every_steps": 100}
QUERIES = ["tumor growth", "myocardial infarction", "seizures in children", "liver cirrhosis", "blood pressure",
           "chemotherapy response", "stroke rehabilitation", "bowel inflammation"]


def corpus_csv(limit: int) -> bytes:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["id", "text", "labels"])
    with DATA.open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= limit:
                break
            w.writerow([f"A{i}", row["medical_abstract"], row["condition_label"]])
    return out.getvalue().encode()


def embed_timed(dep: Deployment, body: bytes, name: str) -> tuple[dict, float]:
    ds = dep.post("/api/v1/datasets", files={"file": (name, body)}, data={"label_columns": "labels"}).json()
    started = time.perf_counter()
    run = dep.post("/api/v1/embedding-runs", json={"dataset_id": ds["id"], "shard_size": SHARD}).json()
    done = dep.wait_done(f"/api/v1/embedding-runs/{run['id']}", timeout=3600)
    assert done["status"] == "succeeded", done
    return done, time.perf_counter() - started


def scaling(dep: Deployment, body: bytes) -> tuple[dict, dict]:
    one, t_one = embed_timed(dep, body, "one.csv")
    second = dep.start_worker("embedder", suffix="-2")
    dep.wait_worker_ready(second)
    _, t_two = embed_timed(dep, body, "two.csv")
    second.stop()
    return one, {"documents": one["n_documents"], "shard_size": SHARD, "one_worker_s": round(t_one, 2),
                 "two_workers_s": round(t_two, 2), "ratio": round(t_one / t_two, 3)}


def prepare_search(dep: Deployment, embedding: dict) -> tuple[int, list[int], list[str]]:
    """Train an SAE and name its densest features; returns (run id, feature indices, label words)."""
    sae = dep.post("/api/v1/sae-runs", json={"embedding_run_id": embedding["id"], "config": SAE}).json()[0]
    sae = dep.wait_done(f"/api/v1/sae-runs/{sae['id']}", timeout=3600)
    assert sae["status"] == "succeeded", sae
    dense = dep.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=density&limit=40").json()["items"]
    indices = [f["index"] for f in dense]
    job = dep.post(f"/api/v1/sae-runs/{sae['id']}/interpretations",
                   json={"backends": [{"backend": "keywords"}], "features": indices}).json()
    dep.wait_done(f"/api/v1/jobs/{job['id']}", timeout=1800)
    named = dep.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=density&limit=40").json()["items"]
    words = sorted({f["label"].split(",")[0].split()[0] for f in named if f["label"]}) or ["tumor"]
    return sae["id"], indices, words


def request_mix(run_id: int, indices: list[int], words: list[str], rng: random.Random) -> tuple[str, str, dict | None]:
    """(kind, path, JSON body or None for a GET), drawn from the search workload."""
    kind = rng.choice(["expression", "expression", "label", "text", "feature_list"])
    path = f"/api/v1/sae-runs/{run_id}/search"
    if kind == "expression":
        a, b = rng.sample(indices, 2)
        expr = rng.choice([f"F{a} > 0.05", f"F{a} > 0 AND NOT F{b}", f"0.7*F{a} + 0.3*F{b} >= 0.1"])
        return kind, path, {"mode": "expression", "expression": expr, "limit": 20}
    if kind == "label":
        return kind, path, {"mode": "label", "query": rng.choice(words), "limit": 20}
    if kind == "text":
        return kind, path, {"mode": "text", "text": rng.choice(QUERIES), "limit": 20}
    return kind, f"/api/v1/sae-runs/{run_id}/features?q={rng.choice(words)}&limit=20", None


async def client_loop(client: httpx.AsyncClient, deadline: float, seed: int, run_id: int, indices: list[int],
                      words: list[str], samples: list[tuple[str, float, int]]) -> None:
    rng = random.Random(seed)
    while time.perf_counter() < deadline:
        kind, path, body = request_mix(run_id, indices, words, rng)
        started = time.perf_counter()
        try:
            resp = await (client.post(path, json=body) if body is not None else client.get(path))
            status = resp.status_code
        except httpx.HTTPError:
            status = 0
        samples.append((kind, (time.perf_counter() - started) * 1000, status))


def summarise(samples: list[tuple[str, float, int]], seconds: float) -> dict:
    def stats(rows: list[tuple[str, float, int]]) -> dict:
        ms = sorted(r[1] for r in rows)
        return {"requests": len(rows), "rps": round(len(rows) / seconds, 1),
                "p50_ms": round(statistics.median(ms), 1) if ms else None,
                "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 1) if ms else None,
                "errors": sum(1 for r in rows if not 200 <= r[2] < 300)}

    out = {"all": stats(samples)}
    for kind in sorted({s[0] for s in samples}):
        out[kind] = stats([s for s in samples if s[0] == kind])
    return out


async def load(dep: Deployment, run_id: int, indices: list[int], words: list[str], clients: int,
               seconds: float) -> dict:
    samples: list[tuple[str, float, int]] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=dep.url(), headers=dep.headers(), timeout=30, limits=limits) as client:
        for kind, path, body in [request_mix(run_id, indices, words, random.Random(i)) for i in range(10)]:
            await (client.post(path, json=body) if body is not None else client.get(path))  # warm caches
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(client_loop(client, deadline, i, run_id, indices, words, samples)
                               for i in range(clients)))
    return summarise(samples, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=600, help="Abstracts embedded (each run).")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "load.json")
    args = parser.parse_args()

    url = create_pg_database()
    with tempfile.TemporaryDirectory(prefix="prisma-load-") as tmp:
        root = Path(tmp)
        # INFO logs as deployed (the access log included): the harness also waits on them.
        dep = Deployment(root=root, database_url=url, artifact_root=(root / "artifacts").as_uri())
        try:
            dep.start_all()
            embedding, scale = scaling(dep, corpus_csv(args.limit))
            print("scaling:", scale, flush=True)
            run_id, indices, words = prepare_search(dep, embedding)
            result = asyncio.run(load(dep, run_id, indices, words, args.clients, args.seconds))
        finally:
            dep.stop_all()
            drop_pg_database(url)
    overall = result["all"]
    report = {
        "what": "search endpoints of the multi-process deployment (gateway, service apps, workers as "
                "separate processes; PostgreSQL; Redis), and embedder workers 1 vs 2 on the same documents",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "2 cores shared by every process of the deployment, the load generator and "
                            "other work on the machine; torch 1 thread per process"},
        "config": {"clients": args.clients, "seconds": args.seconds, "documents": args.limit, "sae": SAE},
        "load": result,
        "goals": {"errors": {"goal": 0, "value": overall["errors"], "met": overall["errors"] == 0},
                  "p99_ms": {"goal": 200, "value": overall["p99_ms"], "met": overall["p99_ms"] < 200}},
        "embedder_scaling": scale,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
