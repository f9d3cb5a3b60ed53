"""Load on the multi-process deployment, and embedder scaling.

The deployment is the one the distributed tests start (tests/distributed/harness.py): the
gateway, each service's app and each queue's worker as separate processes, on PostgreSQL (a
fresh database) and a Redis server of its own. Medical Abstracts (read in place) are imported
twice and embedded once with one embedder worker, once with two (same documents, same spec):
the scaling ratio is the first wall time over the second. An SAE is trained on the first run,
its features named (keywords), and then `--clients` concurrent clients send search requests for
`--seconds`: feature expressions, label search, text search (query embedded and encoded by the
embedder and SAE services) and the feature list filtered by text. Goals: 0 errors, p99 < 200 ms.

Two scenarios, in the same run: closed loop (each client sends its next request as soon as the
last answers: saturation throughput) and paced (`--rates` requests/s in all, latency corrected for
coordinated omission).

    python bench/load.py [--limit 600] [--clients 50] [--seconds 60] [--rates 50,100] [--gateway-workers 2]

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
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/load.py` from the repo root

from tests.conftest import create_pg_database, drop_pg_database  # noqa: E402
from tests.distributed.harness import Deployment  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "medical-abstracts" / "medical_tc_test.csv"
SHARD = 64
SAE = {"expansion_factor": 4, "k": 16, "max_steps": 400, "batch_size": 64, "checkpoint_every_steps": 100}
ERRORS: list[str] = []  # the first failed requests, for the report
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


async def client_loop(client: aiohttp.ClientSession, deadline: float, seed: int, run_id: int, indices: list[int],
                      words: list[str], samples: list[tuple[str, float, int]], interval: float | None) -> None:
    """One client. `interval` None: closed loop, the next request as soon as the last answers.
    Otherwise paced: request j is due at start + j·interval (random phase per client); a request
    sent late because the last one was slow is timed from when it was due, not from when it was
    sent, so that a slow server cannot hide its queue (wrk2's correction of coordinated omission)."""
    rng = random.Random(seed)
    due = time.perf_counter() + (rng.uniform(0, interval) if interval else 0.0)
    while due < deadline:
        if interval:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        kind, path, body = request_mix(run_id, indices, words, rng)
        started = due if interval else time.perf_counter()
        try:
            async with (client.post(path, json=body) if body is not None else client.get(path)) as resp:
                text = await resp.text()
                status = resp.status
            if not 200 <= status < 300 and len(ERRORS) < 10:
                ERRORS.append(f"{kind} {status}: {text[:300]}")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            status = 0
            if len(ERRORS) < 10:
                ERRORS.append(f"{kind} {type(exc).__name__}: {exc}")
        samples.append((kind, (time.perf_counter() - started) * 1000, status))
        due = due + interval if interval else time.perf_counter()


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
               seconds: float, rate: float | None = None) -> dict:
    """`clients` concurrent clients for `seconds`; closed loop, or `rate` requests/s in all."""
    interval = clients / rate if rate else None
    samples: list[tuple[str, float, int]] = []
    # aiohttp, not httpx: the load generator shares the deployment's two cores, and httpx spent
    # about 7 ms of CPU per request here (aiohttp about a third of that).
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(base_url=dep.url(), headers=dep.headers(), connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=30)) as client:
        for kind, path, body in [request_mix(run_id, indices, words, random.Random(i)) for i in range(10)]:
            async with (client.post(path, json=body) if body is not None else client.get(path)) as resp:
                await resp.read()  # warm caches
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(client_loop(client, deadline, i, run_id, indices, words, samples, interval)
                               for i in range(clients)))
    return summarise(samples, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=600, help="Abstracts embedded (each run).")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rates", default="50,100",
                        help="Requests/s of the paced scenarios, in all (50 clients at 50/s: one request a "
                             "second each).")
    parser.add_argument("--gateway-workers", type=int, default=2, help="prisma serve --workers.")
    parser.add_argument("--no-scaling", action="store_true", help="Embed once, with one worker (quicker).")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "load.json")
    args = parser.parse_args()

    url = create_pg_database()
    load_avg = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="prisma-load-") as tmp:
        root = Path(tmp)
        # INFO logs as deployed (the access log included): the harness also waits on them.
        dep = Deployment(root=root, database_url=url, artifact_root=(root / "artifacts").as_uri())
        try:
            dep.start_all(gateway_workers=args.gateway_workers)
            if args.no_scaling:
                embedding, scale = embed_timed(dep, corpus_csv(args.limit), "one.csv")[0], None
            else:
                embedding, scale = scaling(dep, corpus_csv(args.limit))
                print("scaling:", scale, flush=True)
            run_id, indices, words = prepare_search(dep, embedding)
            closed = asyncio.run(load(dep, run_id, indices, words, args.clients, args.seconds))
            print("closed loop:", closed["all"], flush=True)
            paced = {}
            for rate in [float(r) for r in args.rates.split(",")]:
                paced[f"{rate:g}_rps"] = asyncio.run(load(dep, run_id, indices, words, args.clients, args.seconds,
                                                          rate=rate))
                print(f"paced {rate:g}/s:", paced[f"{rate:g}_rps"]["all"], flush=True)
        finally:
            dep.stop_all()
            drop_pg_database(url)
    errors = closed["all"]["errors"] + sum(p["all"]["errors"] for p in paced.values())
    first = next(iter(paced.values()))["all"]  # the goal's scenario: the first rate
    # Little's law: with N requests always in flight, mean latency = N / throughput.
    bound_ms = round(1000 * args.clients / closed["all"]["rps"], 1)
    report = {
        "what": "search endpoints of the multi-process deployment (gateway, service apps, workers as "
                "separate processes; PostgreSQL; Redis), and embedder workers 1 vs 2 on the same documents",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average_at_start": load_avg,
                    "note": "2 cores shared by every process of the deployment, the load generator and "
                            "other work on the machine; torch 1 thread per process"},
        "config": {"clients": args.clients, "seconds": args.seconds, "documents": args.limit, "sae": SAE,
                   "gateway_workers": args.gateway_workers, "paced_rates_rps": args.rates},
        "scenarios": {
            "closed_loop": f"{args.clients} clients, each sending its next request as soon as the last one "
                           "answers: the deployment's saturation throughput. Latency here is queueing: by "
                           f"Little's law its mean is {args.clients} / throughput",
            "paced": f"{args.clients} clients sending a fixed rate in all ({args.rates} requests/s), each on "
                     "its own schedule; latency timed from when a request was due (corrects coordinated "
                     "omission)",
        },
        "load": {"closed_loop": closed, "paced": paced},
        "goals": {
            "errors": {"goal": 0, "value": errors, "met": errors == 0},
            "p99_ms_paced": {"goal": 200, "rate_rps": next(iter(paced)), "value": first["p99_ms"],
                             "met": first["p99_ms"] < 200},
            "p99_ms_closed_loop": {"goal": 200, "value": closed["all"]["p99_ms"],
                                   "met": closed["all"]["p99_ms"] < 200,
                                   "little_law_mean_ms": bound_ms,
                                   "rps_needed_for_mean_under_200_ms": round(args.clients / 0.2)},
        },
        "first_errors": ERRORS,
        "embedder_scaling": scale,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
