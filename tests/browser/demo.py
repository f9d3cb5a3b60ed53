"""`prisma demo` on a small corpus, once per test session, for the browser tests that walk its
pipeline (the tour and the concepts): starting it twice would cost minutes.

The suite starts it in the background as soon as collection is done (tests/conftest.py; under
pytest-xdist the controller starts it once and the worker that runs tests/browser attaches to it)
and runs the modules that use it last, so its pipeline (on one torch thread) runs beside the rest
of the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx

from tests.live import HTTP, PRISMA, REPO_ROOT, free_port, prisma_env, stop

N_NOTES = 400
N_CONCEPTS = 4  # gateway/domain/concepts/demo.py: the probe, the expression, the scoped probe, the one to label


class Demo(NamedTuple):
    url: str
    key: str
    concepts: list[dict]


def launch_demo(data: Path, port: int, log: Path) -> subprocess.Popen:
    """`prisma demo` on a loopback port, its torch on one thread (the suite runs beside it)."""
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen([PRISMA, "demo", "--port", str(port), "--n", str(N_NOTES)], cwd=REPO_ROOT,
                                env=prisma_env(data, PRISMA_LOG_JSON="false", PRISMA_EMBEDDER_THREADS="1",
                                               PRISMA_SAE_THREADS="1",
                                               PRISMA_EMBEDDER_DEFAULT_MODEL="default"),  # the real default
                                stdout=out, stderr=subprocess.STDOUT)


def demo_key(proc: subprocess.Popen | None, log: Path, timeout: float = 180) -> str:
    """The key `prisma demo` prints once it listens (`proc`: None for a demo another process started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"Key\s+(prisma_\S+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"prisma demo exited: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    if proc is not None:
        proc.kill()
    raise TimeoutError(log.read_text(errors="replace")[-3000:])


def wait_for_concepts(url: str, key: str, timeout: float = 900) -> list[dict]:
    """The demo's chain: embed → SAE → names → its four concepts (two probes, one expression, one to label)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # the demo's pipeline shares the server's process: answers can be slow meanwhile
            items = HTTP.get(f"{url}/api/v1/concepts", headers={"Authorization": f"Bearer {key}"},
                              timeout=60).json()["items"]
        except httpx.TransportError:  # not listening yet (the key is printed first), or slow
            time.sleep(0.5)
            continue
        if len(items) == N_CONCEPTS:
            return items
        time.sleep(2)
    raise TimeoutError("the demo made no concepts")


SHARED = "PRISMA_TEST_SHARED_DEMO"
"""`<directory> <port>` of a demo that pytest-xdist's controller started: its workers attach to it."""


class Background:
    """The session's demo: started by `start`, joined by the `demo` fixture, stopped at the end. Under
    pytest-xdist the controller starts it and `share`s it; a worker attaches (no process of its own)
    and leaves stopping it to the controller."""

    proc: subprocess.Popen | None = None
    tmp: Path | None = None
    port = 0
    demo: Demo | None = None
    attached = False

    @classmethod
    def start(cls) -> None:
        if cls.proc is None and not cls.attached:
            if shared := os.environ.get(SHARED):
                directory, port = shared.rsplit(" ", 1)
                cls.tmp, cls.port, cls.attached = Path(directory), int(port), True
                return
            cls.tmp = Path(tempfile.mkdtemp(prefix="prisma-test-demo-"))
            cls.port = free_port()
            cls.proc = launch_demo(cls.tmp / "data", cls.port, cls.tmp / "demo.log")

    @classmethod
    def share(cls) -> None:
        """Hand the running demo to the processes started after this (pytest-xdist's workers)."""
        os.environ[SHARED] = f"{cls.tmp} {cls.port}"

    @classmethod
    def join(cls) -> Demo:
        """The running demo with its concepts (started now if collection did not start it)."""
        if cls.demo is None:
            cls.start()
            assert cls.tmp is not None and (cls.proc is not None or cls.attached)
            key = demo_key(cls.proc, cls.tmp / "demo.log")
            url = f"http://127.0.0.1:{cls.port}"
            cls.demo = Demo(url, key, wait_for_concepts(url, key))
        return cls.demo

    @classmethod
    def stop(cls) -> None:
        if cls.attached:  # the controller's: it stops it
            return
        if cls.proc is not None:
            stop(cls.proc)
            cls.proc = None
        if cls.tmp is not None:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            cls.tmp = None


@contextmanager
def running_demo() -> Iterator[Demo]:
    try:
        yield Background.join()
    finally:
        Background.stop()
