"""Security benchmark → bench/results/security.json.

(a) `dos_worst_server_ms`: each of the security review's denial-of-service inputs (issue #19) sent
    to the real gateway app (embedded mode, SQLite, in-process over httpx's ASGITransport, so the
    time is the server's: no network) and to a real service app; each timed `--repeats` times, the
    slowest kept; the worst of all inputs is the headline. The answer's status is recorded too: each
    input should now be a 4xx naming its limit. The first request of each is reported apart
    (`cold_ms`: imports, templates, the in-process services' start-up). The headline is the worst
    input's median wall time over the warm repeats (one request stalled by the scheduler on a shared,
    loaded machine does not make an input slow); the max wall time and the max CPU time of the
    process during a request (`dos_worst_cpu_ms`, what the request itself cost) are kept beside it.
    Goal < 1000 ms.
(b) `fuzz_cases` / `fuzz_5xx`: Schemathesis against the gateway's OpenAPI schema with an API key,
    every operation, positive and negative examples, bounded by `--fuzz-examples` per operation and
    mode and by `--fuzz-seconds` in all. Goal: 0 × 5xx.
(c) `routes_covered_fraction`: routes in the permission matrix / routes the gateway serves, read
    from the permission-matrix test module when it exists (see PERMISSION MATRIX HOOK), else null.

Usage: nice -n 19 python bench/security.py [--repeats 5] [--fuzz-seconds 180] [--fuzz-examples 12]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.config import GatewaySettings  # noqa: E402

RESULTS = ROOT / "bench/results/security.json"
# Inputs within the limits, answered (cheaply): the worst the suggestion scan and a listing can cost.
ANSWERED_2XX = {"suggest_query_2kB_under_cap", "document_listing_500_of_2MB"}
N_FEATURES = 2000

# ---- PERMISSION MATRIX HOOK ------------------------------------------------------------------
# The `roles` branch adds a permission-matrix test: every route × role → expected status. When one
# of these modules exists and defines one of these names (a mapping or an iterable whose keys/items
# start with (method, path)), `routes_covered_fraction` = matrix routes / routes the gateway serves.
PERMISSION_MATRIX_MODULES = ("tests.gateway.test_permission_matrix", "tests.gateway.test_permissions",
                             "tests.test_permission_matrix")
PERMISSION_MATRIX_NAMES = ("MATRIX", "PERMISSION_MATRIX", "PERMISSIONS", "EXPECTED")
# ----------------------------------------------------------------------------------------------


def served_routes(app: Any) -> set[tuple[str, str]]:
    """(METHOD, path) of every route the gateway serves (API and dashboard), HEAD/OPTIONS aside."""
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    out = set()
    for route in app.routes:
        if isinstance(route, APIRoute | Route):
            out |= {(m, route.path) for m in (route.methods or ()) if m not in ("HEAD", "OPTIONS")}
    return out


def routes_covered_fraction(app: Any) -> tuple[float | None, str]:
    for name in PERMISSION_MATRIX_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr in PERMISSION_MATRIX_NAMES:
            matrix = getattr(module, attr, None)
            if matrix is None:
                continue
            keys = {(str(k[0]).upper(), str(k[1])) for k in matrix if isinstance(k, tuple) and len(k) >= 2}
            routes = served_routes(app)
            if keys and routes:
                return round(len(keys & routes) / len(routes), 4), f"{name}.{attr}"
    return None, "no permission-matrix module yet (the roles branch adds it)"


def make_app(data_dir: Path) -> Any:
    from gateway.app import create_app

    settings = GatewaySettings(data_dir=data_dir, database_url=None, redis_url=None, log_json=False,
                               log_level="ERROR", secret_key="bench-secret", auto_migrate=True)
    return create_app(settings, configure_logs=False)


def new_key(app: Any, role: str = "admin") -> dict[str, str]:
    """A key of the built-in admin, or of a new user of `role` who is a member of the default project."""
    from gateway.db import session_scope
    from gateway.domain.auth import repo
    from gateway.domain.auth.accounts import create_user, default_project
    from gateway.domain.auth.service import create_key

    with session_scope(app.state.factory) as session:
        user = None
        if role != "admin":
            user = create_user(session, name=f"bench-{role}-{uuid.uuid4().hex[:6]}", role=role)
            repo.add_membership(session, user_id=user.id, project_id=default_project(session).id)
        _, plain = create_key(session, name=f"bench-{uuid.uuid4().hex[:6]}", user=user)
    return {"Authorization": f"Bearer {plain}"}


def write_wide_run(app: Any, dataset_id: int, n_docs: int) -> tuple[int, int]:
    """A finished SAE run of N_FEATURES features over the dataset (codes only): (sae run id, embedding run id)."""
    from gateway.db import session_scope
    from tests.factories import add_coded_sae_run

    codes = sp.random(n_docs, N_FEATURES, density=0.05, format="csc", dtype=np.float32, random_state=0)
    with session_scope(app.state.factory) as session:
        run = add_coded_sae_run(session, app.state.store, dataset_id=dataset_id, codes=codes, density=0.05)
        return run.id, run.embedding_run_id


def zip_bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("cfg.json", json.dumps({"activation": "topk", "num_latents": 8, "k": 2, "d_in": 4}))
        zf.writestr("sae.safetensors", bytes(20 << 20))  # 20 MB of zeros, ~20 kB zipped
    return buf.getvalue()


def dos_inputs(run_id: int, emb_id: int, dataset_id: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(name, method, path, httpx request kwargs) of each input of the review, as an attacker with a key sends it."""
    csv_24kb = ("text," + ",".join(f"column_{i:05d}" for i in range(2000)))[:24_000] + "\nuna nota\n"
    sniffer_24kb = ',"' * 12_000 + "\nx\n"
    search = f"/api/v1/sae-runs/{run_id}/search"

    def expr(text: str) -> dict[str, Any]:
        return {"json": {"mode": "expression", "expression": text}}

    return [
        ("csv_header_24kB", "POST", "/api/v1/datasets", {"files": {"file": ("wide.csv", csv_24kb.encode())}}),
        ("csv_header_24kB_sniffer_pattern", "POST", "/api/v1/datasets",
         {"files": {"file": ("odd.csv", sniffer_24kb.encode())}}),
        ("suggest_query_10kB", "GET", f"/sae-runs/{run_id}/search/suggest", {"params": {"q": 'x"' * 5_000}}),
        ("suggest_query_2kB_under_cap", "GET", f"/sae-runs/{run_id}/search/suggest",
         {"params": {"q": 'x"' * 980 + ' OR label:"sosp'}}),
        ("search_page_10kB", "GET", f"/sae-runs/{run_id}/search", {"params": {"q": "NOT " * 2_500}}),
        ("not_x2000", "POST", search, expr("NOT " * 2000 + "F1")),
        ("sum_3000_terms", "POST", search, expr("+".join(["F0"] * 3000))),
        ("label_bad_escape", "POST", search, expr('F1 OR label:"\\x"')),
        ("any_F0_to_F1600", "POST", search, expr("any(" + ", ".join(f"F{i}" for i in range(1601)) + ")")),
        ("any_700_weighted", "POST", search, expr("any(" + ", ".join(["0.5*F1"] * 700) + ")")),
        ("concept_not_x999", "POST", "/api/v1/concepts",
         {"json": {"sae_run_id": run_id, "name": "deep", "kind": "expression", "expression": "NOT " * 999 + "F1"}}),
        ("csrf_token_non_ascii", "POST", "/login", {"data": {"key": "prisma_x_y", "csrf_token": "é" * 43}}),
        ("api_key_non_ascii", "GET", "/api/v1/datasets", {"headers": {"Authorization": "Bearer é".encode()}}),
        ("mapping_nested_30000", "POST", "/api/v1/datasets",
         {"files": {"file": ("a.csv", b"note\nuna nota\n")}, "data": {"mapping": "[" * 30_000 + "]" * 30_000}}),
        ("multipart_1000_fields", "POST", "/api/v1/datasets",
         {"files": {"file": ("a.csv", b"text\nuna nota\n")}, "data": {f"f{i}": "x" for i in range(1000)}}),
        ("multipart_field_1MB", "POST", "/api/v1/datasets",
         {"files": {"file": ("a.csv", b"text\nuna nota\n")}, "data": {"description": "d" * (1 << 20)}}),
        ("sae_epochs_1e9", "POST", "/api/v1/sae-runs", {"json": {"embedding_run_id": emb_id, "config": {"epochs": 10**9}}}),
        ("sae_max_steps_1e12", "POST", "/api/v1/sae-runs",
         {"json": {"embedding_run_id": emb_id, "config": {"max_steps": 10**12}}}),
        ("embedding_shard_size_1e9", "POST", "/api/v1/embedding-runs", {"json": {"dataset_id": dataset_id, "shard_size": 10**9}}),
        ("embedding_model_path", "POST", "/api/v1/embedding-runs", {"json": {"dataset_id": dataset_id, "model": "/etc"}}),
        ("sae_import_zip_bomb", "POST", "/api/v1/sae-runs/import",
         {"files": {"file": ("bomb.zip", zip_bomb())}, "data": {"embedding_run_id": str(emb_id)}}),
        ("document_listing_500_of_2MB", "GET", f"/api/v1/datasets/{dataset_id}/documents", {"params": {"limit": 500}}),
    ]


def timing(status: int, wall_ms: list[float], cpu_ms: list[float]) -> dict[str, Any]:
    """Warm requests' wall time (median and max) and CPU time (max), the first (cold) one apart."""
    return {"status": status, "server_ms_median": round(statistics.median(wall_ms[1:]), 1),
            "server_ms_max": round(max(wall_ms[1:]), 1), "cpu_ms_max": round(max(cpu_ms[1:]), 1),
            "cold_ms": round(wall_ms[0], 1)}


async def time_dos(app: Any, auth: dict[str, str], repeats: int) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=None) as client:
        big = "\n".join(f"d{i},{'paziente con tosse ' * 110_000}" for i in range(8))  # 8 notes of ~2 MB
        ds = await client.post("/api/v1/datasets", headers=auth, files={"file": ("big.csv", f"id,text\n{big}\n".encode())})
        ds.raise_for_status()
        dataset_id = ds.json()["id"]
        run_id, emb_id = write_wide_run(app, dataset_id, 8)
        results = {}
        for name, method, path, kwargs in dos_inputs(run_id, emb_id, dataset_id):
            if name == "csrf_token_non_ascii":
                await client.get("/login")  # the session has a token to compare with
            headers = {**auth, **kwargs.pop("headers", {})} if not path.startswith("/login") else kwargs.pop("headers", {})
            times, cpu, status = [], [], None
            for _ in range(repeats + 1):  # the first is cold (imports, templates, the in-process services' start)
                t0, c0 = time.perf_counter(), time.process_time()
                resp = await client.request(method, path, headers=headers, **kwargs)
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                status = resp.status_code
            results[name] = timing(status, times, cpu)
            print(f"{name:32s} {status}  median {results[name]['server_ms_median']:8.1f} ms  "
                  f"max {results[name]['server_ms_max']:8.1f} ms  cpu max {results[name]['cpu_ms_max']:8.1f} ms  "
                  f"cold {times[0]:8.1f} ms", flush=True)
    return results


async def time_service_token(repeats: int) -> dict[str, Any]:
    """A service app (the interpreter, which returns document text) with a token, sent non-ASCII tokens."""
    from pydantic import SecretStr

    from services.interpreter.app import create_app
    from services.interpreter.config import InterpreterSettings

    async def no_embed(texts: list[str]) -> Any:
        raise AssertionError("not called")

    with tempfile.TemporaryDirectory() as root:
        app = create_app(InterpreterSettings(artifact_root=root, service_token=SecretStr("t" * 64)), embed_texts=no_embed)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8003") as c:
            times, cpu, status = [], [], None
            for _ in range(repeats + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                resp = await c.post("/examples", json={}, headers={"Authorization": ("Bearer " + "é" * 64).encode()})
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                status = resp.status_code
    return {"service_token_non_ascii": timing(status, times, cpu)}


def fuzz(app: Any, auth: dict[str, str], *, seconds: float, examples: int) -> dict[str, Any]:
    """Schemathesis over every gateway operation; counts the requests and the 5xx answers."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app, headers=dict(auth))
    conf = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                    database=None)
    counts = {"cases": 0, "5xx": 0}
    failures: list[str] = []
    deadline = time.monotonic() + seconds
    operations = [r.ok() for r in schema.get_all_operations()]
    skipped = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if time.monotonic() > deadline:
                skipped += 1
                continue

            @conf
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                if time.monotonic() > deadline:
                    return
                response = case.call(headers=dict(auth))
                counts["cases"] += 1
                if response.status_code >= 500:
                    counts["5xx"] += 1
                    failures.append(f"{operation.label} ({mode.value}): {response.status_code}")

            try:
                run()
            except Unsatisfiable:
                continue
    return {"fuzz_cases": counts["cases"], "fuzz_5xx": counts["5xx"], "fuzz_operations": len(operations),
            "fuzz_operation_modes_skipped_for_time": skipped, "fuzz_failures": failures[:20]}


def fuzz_fresh_gateway(data_dir: Path, *, seconds: float, examples: int) -> dict[str, Any]:
    """A gateway of its own (what the fuzzer creates or deletes touches nothing else), one small dataset."""
    app = make_app(data_dir)
    try:
        auth = new_key(app)

        async def upload() -> None:
            rows = "\n".join(f"N{i},nota {i} con tosse e febbre,tosse" for i in range(6))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
                resp = await c.post("/api/v1/datasets", headers=auth, data={"label_columns": "labels"},
                                    files={"file": ("d.csv", f"id,text,labels\n{rows}\n".encode())})
                resp.raise_for_status()

        asyncio.run(upload())
        # the issue asks for an editor's and a viewer's key; the admin's is what a full key reaches
        per_role = {role: fuzz(app, new_key(app, role) if role != "admin" else auth, seconds=seconds / 3,
                               examples=examples) for role in ("editor", "viewer", "admin")}
        out: dict[str, Any] = {"fuzz_cases": sum(r["fuzz_cases"] for r in per_role.values()),
                               "fuzz_5xx": sum(r["fuzz_5xx"] for r in per_role.values()),
                               "fuzz_by_role": per_role}
        return out
    finally:
        app.state.runner.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fuzz-seconds", type=float, default=180.0)
    parser.add_argument("--fuzz-examples", type=int, default=12)
    parser.add_argument("--no-fuzz", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        app = make_app(Path(tmp) / "data")
        try:
            auth = new_key(app)
            t0 = time.perf_counter()
            dos = asyncio.run(time_dos(app, auth, args.repeats))
            dos.update(asyncio.run(time_service_token(args.repeats)))
            worst_name = max(dos, key=lambda k: dos[k]["server_ms_median"])
            load_during_dos = os.getloadavg()
            dos_s = time.perf_counter() - t0
            fuzzed = {} if args.no_fuzz else fuzz_fresh_gateway(Path(tmp) / "fuzz", seconds=args.fuzz_seconds,
                                                                examples=args.fuzz_examples)
            coverage, source = routes_covered_fraction(app)
        finally:
            app.state.runner.shutdown()

    out = {
        "dos_worst_server_ms": dos[worst_name]["server_ms_median"],
        "dos_worst_input": worst_name,
        "dos_worst_server_ms_max": max(v["server_ms_max"] for v in dos.values()),
        "dos_worst_cpu_ms": max(v["cpu_ms_max"] for v in dos.values()),
        "dos_worst_cold_ms": max(v["cold_ms"] for v in dos.values()),
        "dos_all_4xx": all(400 <= v["status"] < 500 for k, v in dos.items() if k not in ANSWERED_2XX),
        "dos_inputs": dos,
        "fuzz_cases": fuzzed.get("fuzz_cases"),
        "fuzz_5xx": fuzzed.get("fuzz_5xx"),
        **{k: v for k, v in fuzzed.items() if k not in ("fuzz_cases", "fuzz_5xx")},
        "routes_covered_fraction": coverage,
        "routes_covered_source": source,
        "goals": {"dos_worst_server_ms": "< 1000", "fuzz_5xx": 0, "routes_covered_fraction": 1.0},
        "settings": {"repeats": args.repeats, "fuzz_seconds": args.fuzz_seconds, "fuzz_examples": args.fuzz_examples,
                     "transport": "httpx.ASGITransport (in-process, embedded mode, SQLite)", "dos_seconds": round(dos_s, 1),
                     "load_average_after_dos": [round(x, 2) for x in load_during_dos]},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
    }
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("dos_worst_server_ms", "dos_worst_input", "dos_all_4xx", "fuzz_cases",
                                          "fuzz_5xx", "routes_covered_fraction")}, indent=2))


if __name__ == "__main__":
    main()
