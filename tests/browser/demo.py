"""`prisma demo` on a small corpus, once per test session, for the browser tests that walk its
pipeline (the tour and the concepts): starting it twice would cost minutes."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx

from tests.live import PRISMA, REPO_ROOT, free_port, prisma_env, stop

N_NOTES = 400


class Demo(NamedTuple):
    url: str
    key: str
    concepts: list[dict]


def start_demo(data: Path, port: int, log: Path) -> tuple[subprocess.Popen, str]:
    """`prisma demo` on a loopback port; returns the process and the key it prints."""
    with log.open("wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen([PRISMA, "demo", "--port", str(port), "--n", str(N_NOTES)], cwd=REPO_ROOT,
                                env=prisma_env(data, PRISMA_LOG_JSON="false"), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = re.search(r"Key\s+(prisma_\S+)", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"prisma demo exited: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    proc.kill()
    raise TimeoutError(log.read_text(errors="replace")[-3000:])


def wait_for_concepts(url: str, key: str, timeout: float = 900) -> list[dict]:
    """The demo's chain: embed → SAE → names → its three concepts (two probes, one expression)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # the demo's pipeline shares the server's process: answers can be slow meanwhile
            items = httpx.get(f"{url}/api/v1/concepts", headers={"Authorization": f"Bearer {key}"},
                              timeout=60).json()["items"]
        except httpx.TransportError:  # not listening yet (the key is printed first), or slow
            time.sleep(0.5)
            continue
        if len(items) == 3:
            return items
        time.sleep(2)
    raise TimeoutError("the demo made no concepts")


@contextmanager
def running_demo(tmp: Path) -> Iterator[Demo]:
    port = free_port()
    proc, key = start_demo(tmp / "data", port, tmp / "demo.log")
    url = f"http://127.0.0.1:{port}"
    try:
        yield Demo(url, key, wait_for_concepts(url, key))
    finally:
        stop(proc)
