"""`prisma demo` from an empty data directory to named features: seconds, as a new user waits.

Starts `prisma demo` (2,000 notes by default) in a fresh data directory, the install already done,
and polls the API until the demo's chain (embed notes and clauses → SAE → names → its three
concepts, made right after the names) is through; `seconds_to_named_features` is from the
process's start to then. `--precision` forces the embedder's precision (PRISMA_EMBEDDER_PRECISION)
as 'auto' would pick it on another CPU: on a CPU without native bf16, 'auto' picks int8 for the
default e5-small (`models.int8_encoder`), so `--precision int8` measures
that CPU's path on a machine that has bf16. Also the embedding run's own figures, the jobs'
durations (`stages`: seconds per job) and the ISA caps in the environment (`cpu.isa_caps`):
`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2` cap torch's own vector kernels and oneDNN to
what an AVX2-only CPU has, and `FBGEMM_ENABLE_INSTRUCTIONS=AVX2` caps fbgemm's int8 kernels, which
otherwise pick AVX-512 VNNI themselves (an int8 Linear of e5-small's shape: 27 ms → 40 ms capped), and
`MKL_ENABLE_INSTRUCTIONS=AVX2` caps MKL, torch's fp32 BLAS: the attention's matrix products and the
SAE's, which none of the other three reach (a [4096, 384] × [384, 1536] fp32 product: 12.8 ms → 21.7 ms).
The int8 engine is CTranslate2 (services/embedder/ct2.py): `CT2_FORCE_CPU_ISA=AVX2` caps its own kernels
(its int8 products are oneDNN's, which `ONEDNN_MAX_CPU_ISA` caps too).

    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
        python bench/demo.py --precision int8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import sys
from datetime import datetime, timedelta, timezone

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repository root
from services.embedder.models import cpu_has_native_bf16, default_threads  # noqa: E402
from tests.browser.demo import demo_key  # noqa: E402
from tests.live import HTTP, PRISMA, REPO_ROOT, free_port, prisma_env, stop  # noqa: E402

ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "FBGEMM_ENABLE_INSTRUCTIONS", "MKL_ENABLE_INSTRUCTIONS",
            "CT2_FORCE_CPU_ISA")


def cpu_report(threads: int) -> dict:
    """This CPU as the encoder benchmarks record it: its name, threads, native bf16 and the ISA caps set."""
    name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor())
    return {"model_name": name, "threads": threads, "native_bf16": cpu_has_native_bf16(),
            "isa_caps": {k: os.environ.get(k) for k in ISA_CAPS}}


def job_seconds(job: dict) -> float | None:
    if not job.get("started_at") or not job.get("finished_at"):
        return None
    return round((datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])).total_seconds(), 1)


def timeline(jobs: list[dict], started: datetime, done: datetime) -> dict:
    """Seconds outside the jobs: from the process's start to the first job (corpus, server, model
    load, upload) and from the last job's end to the named features' concepts (probe fits)."""
    created = [datetime.fromisoformat(j["created_at"]) for j in jobs if j.get("created_at")]
    finished = [datetime.fromisoformat(j["finished_at"]) for j in jobs if j.get("finished_at")]
    if not created or not finished:
        return {}
    return {"before_first_job": round((min(created) - started).total_seconds(), 1),
            "after_last_job": round((done - max(finished)).total_seconds(), 1)}


def wait_named(url: str, key: str, timeout: float) -> float:
    """Monotonic time at which the demo's three concepts exist (they follow the names)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            items = HTTP.get(f"{url}/api/v1/concepts", headers={"Authorization": f"Bearer {key}"},
                              timeout=60).json()["items"]
        except httpx.TransportError:
            items = []
        if len(items) == 3:
            return time.monotonic()
        time.sleep(1)
    raise TimeoutError("the demo made no concepts in time")


def get(url: str, key: str, path: str) -> dict:
    return HTTP.get(f"{url}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=60).json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--precision", default="auto", help="PRISMA_EMBEDDER_PRECISION for the demo")
    parser.add_argument("--document-vectors", default="segments", choices=["encoded", "segments"],
                        help="the demo run's document_vectors (prisma demo's default: segments)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/demo.json")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="prisma-bench-demo-"))
    port, log = free_port(), tmp / "demo.log"
    load_before = os.getloadavg()
    started, started_utc = time.monotonic(), datetime.now(timezone.utc).replace(tzinfo=None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [PRISMA, "demo", "--port", str(port), "--n", str(args.n), "--document-vectors", args.document_vectors],
            cwd=REPO_ROOT,
            env=prisma_env(tmp / "data", PRISMA_LOG_JSON="false", PRISMA_EMBEDDER_PRECISION=args.precision,
                           TRANSFORMERS_OFFLINE="1"),
            stdout=out, stderr=subprocess.STDOUT)
    try:
        key = demo_key(proc, log, timeout=600)
        url = f"http://127.0.0.1:{port}"
        done = wait_named(url, key, args.timeout)
        runs = get(url, key, "/api/v1/embedding-runs")["items"]
        jobs = get(url, key, "/api/v1/jobs?limit=50")["items"]
        concepts = get(url, key, "/api/v1/concepts")["items"]
        sae_runs = get(url, key, "/api/v1/sae-runs")["items"]
    finally:
        stop(proc)
    result = runs[0].get("result") or {}
    done_utc = started_utc + timedelta(seconds=done - started)
    report = {
        "benchmark": "demo",
        "seconds_to_named_features": round(done - started, 1),
        "precision": result.get("precision"),
        "engine": result.get("engine"),
        "precision_setting": args.precision,
        "document_vectors": args.document_vectors,
        "cpu": {"model": platform.processor() or platform.machine(), "usable_cpus": default_threads(),
                "native_bf16": cpu_has_native_bf16(),
                "note": "precision forced as 'auto' picks it on a CPU without native bf16" if args.precision != "auto"
                else "auto", "isa_caps": {k: os.environ.get(k) for k in ISA_CAPS}},
        "notes": args.n,
        "embedding": {k: result.get(k) for k in ("seconds", "n_documents", "n_tokens", "n_segments",
                                                 "n_segments_computed", "n_segments_embedded", "device")},
        "stages": {j["kind"]: job_seconds(j) for j in jobs},
        "timeline": timeline(jobs, started_utc, done_utc),
        "jobs": [{k: j.get(k) for k in ("kind", "status", "created_at", "started_at", "finished_at")} for j in jobs],
        "load_average_1m": {"start": load_before[0], "end": os.getloadavg()[0]},
        # the SAE as its run page shows it: its settings and held-out figures
        "sae": [{"config": {k: r["config"]["sae"].get(k) for k in ("batch_size", "lr", "lr_warmup_steps", "epochs")},
                 "metrics": {k: (r.get("metrics") or {}).get(k) for k in ("fvu", "dead_fraction", "l0")}}
                for r in sae_runs],
        # what the user sees on the concept list: each held-out F1 beside the strongest words-alone baseline
        "concepts": [{k: c.get(k) for k in ("name", "kind", "f1", "words")} for c in concepts],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("seconds_to_named_features", "precision", "load_average_1m")}))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
