"""A real `prisma serve` process on a loopback port, for tests that need separate processes."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
PRISMA = str(Path(sys.executable).parent / "prisma")

HTTP = httpx.Client(timeout=30, cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])))
"""One client for the suite's calls to its loopback servers. `httpx.get` builds a client, and with it a TLS
context from the CA bundle, for every call: about 40 ms of CPU on a fast core, which the polling loops (every
0.2-0.5 s, for minutes in all) paid beside the servers they were waiting for on two cores. It keeps no cookie:
every server of the suite is 127.0.0.1, and a session one test's login set must not reach another's request.
A test that needs a new connection per request (to reach several processes on one port) or cookies makes its
own client."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


_GIVEN: set[int] = set()


def free_port() -> int:
    """A loopback port that is free now and that the kernel will not hand out meanwhile.

    A port bound to 0 comes from the ephemeral range, which every outgoing connection draws from
    too (Postgres, Redis, HTTP clients of every xdist worker): between this call and the server's
    own bind one of them took it once (`address already in use`). So ports come from below that
    range, each xdist worker from its own slice of it, never the same twice in a process, and are
    checked by binding.
    """
    low, _ = _ephemeral_range()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    start = max(1024, low - 12_000)
    slice_size = 1_000
    base = start + (index % 12) * slice_size
    for _ in range(200):
        port = base + random.randrange(slice_size)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prisma_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "ARTIFACT_ROOT")}
    env.update({"PRISMA_DATA_DIR": str(data_dir), "PRISMA_LOG_LEVEL": "INFO", "HF_HUB_OFFLINE": "1"}, **extra)
    return env


def _start(data_dir: Path, log_path: Path | None, env: dict[str, str]) -> tuple[str, subprocess.Popen, Path]:
    """Start `prisma serve` on a free port and wait for /health (60 s)."""
    port = free_port()
    log_file = log_path or data_dir.parent / f"server-{port}.log"
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [PRISMA, "serve", "--port", str(port)], env=prisma_env(data_dir, **env), stdout=log,
            stderr=subprocess.STDOUT, cwd=REPO_ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_file.read_text(errors="replace")[-3000:]
            raise ServerDied(f"prisma serve exited with {proc.returncode}; its log ends:\n{tail}")
        try:
            if HTTP.get(f"{url}/health", timeout=1).status_code == 200:
                return url, proc, log_file
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise TimeoutError("prisma serve did not answer /health in 60 s")


class ServerDied(RuntimeError):
    pass


@contextmanager
def serve_in_thread(app, what: str = "the app") -> Iterator[str]:  # noqa: ANN001
    """An ASGI `app` served by uvicorn on a free loopback port, in a thread of this process; its base URL."""
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, f"{what} did not start"
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def live_server(data_dir: Path, *, log_path: Path | None = None, **env: str) -> Iterator[tuple[str, subprocess.Popen]]:
    # A port found free can be taken by another socket before the server binds it: retry on
    # a new port when the server dies at start-up (the log is in the error if it keeps dying).
    for attempt in range(3):
        try:
            url, proc, _ = _start(data_dir, log_path, env)
            break
        except ServerDied:
            if attempt == 2:
                raise
    try:
        yield url, proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def peak_rss_bytes(pid: int) -> int:
    """The process's high-water mark of resident memory (VmHWM), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def create_key(data_dir: Path, name: str = "cli") -> str:
    out = subprocess.run(
        [PRISMA, "apikey", "create", "--name", name], env=prisma_env(data_dir), capture_output=True, text=True,
        check=True, cwd=REPO_ROOT,
    )
    return out.stdout.strip().splitlines()[-1]


def import_random_vectors(client: httpx.Client, url: str, headers: dict[str, str], dataset_id: int, n: int, *,
                          dim: int = 384, seed: int = 0) -> dict:
    """An embedding run for a test of what comes after one (SAE training, resuming it, pages) that does not
    need vectors which mean anything: seeded Gaussian unit vectors for the dataset's n documents, imported
    (POST /api/v1/embedding-runs/import, as a user imports vectors made elsewhere). Embedding the notes
    instead costs the server its model load and about 10 s of CPU per hundred notes on two cores."""
    from tests.factories import npy, unit_vectors

    resp = client.post(f"{url}/api/v1/embedding-runs/import", headers=headers,
                       files={"file": ("vectors.npy", npy(unit_vectors(n, dim, seed)))},
                       data={"dataset_id": str(dataset_id)})
    assert resp.status_code == 201, resp.text
    return resp.json()
