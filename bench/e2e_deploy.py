"""bench/e2e.py's deployments and client: a real deployment (embedded or distributed) started and
stopped, the peak RSS of its processes over a stage, what its store and database hold, and an HTTP
client that waits for jobs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import create_engine, inspect, text

from tests.live import HTTP, free_port

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = Path(sys.executable).parent / "prisma"
PRISMA = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "gateway.cli"]
"""The CLI: the venv's script, else the module (a lent GPU machine's Python has no install of the project)."""
KEPT_ENV = ("PRISMA_MODELS",)
"""Settings a deployment inherits: where this machine's models are (bench/gpu_e2e.sh), not state of a deployment."""
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TERMINAL = ("succeeded", "failed", "cancelled")


# -- processes and what they hold ---------------------------------------------------------

def _proc_bytes(pid: int, field: str, file: str = "status") -> int:
    """A size field of /proc/PID/`file` in bytes (0 when the process is gone): status's VmHWM / VmRSS,
    smaps_rollup's Pss (shared pages split among the processes that map them)."""
    try:
        with open(f"/proc/{pid}/{file}") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMeter:
    """Peak RSS per role over a stage: every process of each role's tree, VmHWM sampled.

    A forked child (the naming process) maps its parent's pages copy-on-write, so its VmHWM counts
    them again; `pss_peaks` is the peak of the tree's summed PSS, what the role really holds,
    sampled every `pss_every` samples.
    """

    def __init__(self, roots: dict[str, int], interval: float = 0.25, pss_every: int = 4) -> None:
        self.roots, self.interval, self.pss_every = roots, interval, pss_every
        self.peaks: dict[str, int] = {}
        self.pss_peaks: dict[str, int] = {}
        self.max_processes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _tree(self) -> dict[str, list[int]]:
        out = {}
        for role, pid in self.roots.items():
            try:
                proc = psutil.Process(pid)
                out[role] = [pid, *(c.pid for c in proc.children(recursive=True))]
            except psutil.NoSuchProcess:
                out[role] = []
        return out

    def _sample(self, pss: bool = True) -> None:
        for role, pids in self._tree().items():
            self.peaks[role] = max([self.peaks.get(role, 0), *(_proc_bytes(p, "VmHWM") for p in pids)])
            self.max_processes[role] = max(self.max_processes.get(role, 0), len(pids))
            if pss:
                self.pss_peaks[role] = max(self.pss_peaks.get(role, 0),
                                           sum(_proc_bytes(p, "Pss", "smaps_rollup") for p in pids))

    def _loop(self) -> None:
        n = 0
        while not self._stop.wait(self.interval):
            n += 1
            self._sample(pss=n % self.pss_every == 0)

    def __enter__(self) -> PeakMeter:
        for pids in self._tree().values():
            for pid in pids:  # the peak restarts from the current RSS
                try:
                    Path(f"/proc/{pid}/clear_refs").write_text("5")
                except OSError:
                    pass
        self.peaks, self.pss_peaks, self.max_processes = {}, {}, {}
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class Deployment:
    """What a stage needs of a deployment: its URL, key, processes, store and database."""

    url: str
    key: str
    artifact_dir: Path
    database_url: str

    def roles(self) -> dict[str, int]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def db_bytes(self) -> int:
        if self.database_url.startswith("sqlite"):
            db = Path(self.database_url.split("///", 1)[1])
            return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
        with create_engine(self.database_url).connect() as c:
            return int(c.execute(text("SELECT pg_database_size(current_database())")).scalar_one())

    def db_rows(self) -> int:
        engine = create_engine(self.database_url)
        try:
            tables = [t for t in inspect(engine).get_table_names() if t != "alembic_version"]
            with engine.connect() as c:
                return sum(int(c.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one()) for t in tables)
        finally:
            engine.dispose()


class Embedded(Deployment):
    """One `prisma serve` on a fresh data dir: SQLite, jobs in-process."""

    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        self.artifact_dir = self.data / "artifacts"
        self.database_url = f"sqlite:///{self.data / 'prisma.db'}"
        self.env = {k: v for k, v in os.environ.items()
                    if k in KEPT_ENV or not k.startswith(("PRISMA_", "DATABASE_URL", "REDIS_URL", "ARTIFACT_ROOT"))}
        self.env.update({"PRISMA_DATA_DIR": str(self.data), "HF_HUB_OFFLINE": "1",
                         "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
                         "PRISMA_LOG_LEVEL": "WARNING"})
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(root / "serve.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen([*PRISMA, "serve", "--port", str(port)], env=self.env, cwd=ROOT,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait(lambda: _healthy(self.url), 180, "prisma serve")
        try:  # a name of its own: --resume starts a server on a data dir that has one already
            out = subprocess.run([*PRISMA, "apikey", "create", "--name", f"e2e-{uuid.uuid4().hex[:8]}"], env=self.env,
                                 cwd=ROOT, capture_output=True, text=True, check=True)
        except BaseException:
            self.stop()
            raise
        self.key = out.stdout.strip().splitlines()[-1]

    def roles(self) -> dict[str, int]:
        return {"serve": self.proc.pid}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Distributed(Deployment):
    """The distributed tests' layout (tests/distributed/harness.py) with production-like settings."""

    def __init__(self, root: Path) -> None:
        from tests.distributed.harness import Deployment as Harness

        self.pg_name = f"prisma_e2e_{uuid.uuid4().hex[:8]}"
        with create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT").connect() as c:
            c.execute(text(f'CREATE DATABASE "{self.pg_name}"'))
        self.database_url = PG_ADMIN.rsplit("/", 1)[0] + f"/{self.pg_name}"
        self.artifact_dir = root / "artifacts"
        self.dep = Harness(root=root, database_url=self.database_url, artifact_root=self.artifact_dir.as_uri(),
                           extra_env={"PRISMA_EMBEDDER_THREADS": "2", "PRISMA_SAE_THREADS": "2",
                                      "OMP_NUM_THREADS": "2", "PRISMA_EMBEDDER_PRECISION": "auto",
                                      "PRISMA_JOB_LEASE_S": "30", "PRISMA_EMBEDDER_CLAIM_LEASE_S": "60",
                                      "PYTHONPATH": str(ROOT)})  # INFO logs: the harness waits on them
        try:
            self.dep.start_all(gateway_workers=1)
        except BaseException:
            self.stop()
            raise
        self.url, self.key = self.dep.url(), self.dep.api_key

    def roles(self) -> dict[str, int]:
        return {name: p.popen.pid for name, p in self.dep.procs.items() if p.alive}

    def stop(self) -> None:
        self.dep.stop_all()
        with create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT").connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)'))


def _healthy(url: str) -> bool:
    try:
        return HTTP.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


# -- the client -------------------------------------------------------------------------

class Client:
    def __init__(self, dep: Deployment) -> None:
        self.http = httpx.Client(base_url=dep.url, headers={"Authorization": f"Bearer {dep.key}"},
                                 timeout=httpx.Timeout(1800, connect=30))

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        resp = self.http.request(method, path, **kw)
        if resp.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:2000]}")
        return resp

    def done(self, path: str, timeout: float = 7200) -> dict:
        def finished() -> dict | None:
            body = self.call("GET", path).json()
            return body if body["status"] in TERMINAL else None

        body = wait(finished, timeout, path)
        if body["status"] != "succeeded":
            raise RuntimeError(f"{path}: {body['status']} {body.get('error') or ''}")
        return body


# -- the corpus and its vectors -----------------------------------------------------------
