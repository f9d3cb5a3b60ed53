"""The compose deployment's process layout without Docker: each Prisma process its own OS process.

The gateway (`prisma serve`), each service's app (`prisma service <name>`) on loopback ports, and
each queue's worker (`prisma worker <queue>`), on the real PostgreSQL (a fresh database) and a
Redis server of the harness's own (append-only, like compose's, so that restarting it mid-job is
a test that cannot disturb the shared Redis other tests use).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.conftest import MACHINERY_ENCODER
from tests.live import HTTP, free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
PRISMA = str(Path(sys.executable).parent / "prisma")
SERVICE_PORTS = ("embedder", "sae", "interpreter")
QUEUES = ("gateway", "embedder", "sae", "interpreter")
TERMINAL = ("succeeded", "failed", "cancelled")
TOKEN = "distributed-test-token"
LEASE_S = 4.0  # a killed worker's job is taken over within this (production: 30 s)


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


@dataclass
class Proc:
    """One OS process of the deployment, restartable, with its own log file."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen | None = None
    offset: int = 0  # where this start's lines begin in the log

    def start(self) -> Proc:
        self.offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                          cwd=REPO_ROOT, start_new_session=True)
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            self.popen.send_signal(sig)
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        if not self.alive:
            return
        self.popen.terminate()
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_since_start(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace")


@dataclass
class Deployment:
    root: Path
    database_url: str
    artifact_root: str
    redis_port: int = field(default_factory=free_port)
    ports: dict[str, int] = field(default_factory=lambda: {n: free_port() for n in ("gateway", *SERVICE_PORTS)})
    procs: dict[str, Proc] = field(default_factory=dict)
    api_key: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)

    # -- addresses and environment -----------------------------------------------------
    def url(self, name: str = "gateway") -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("PRISMA_", "DATABASE_URL", "REDIS_URL",
                                                                           "ARTIFACT_ROOT"))}
        keep.update({
            "DATABASE_URL": self.database_url, "REDIS_URL": self.redis_url, "ARTIFACT_ROOT": self.artifact_root,
            "PRISMA_SERVICE_TOKEN": TOKEN, "PRISMA_DATA_DIR": str(self.root / "gateway-data"),
            "PRISMA_SECRET_KEY": "distributed-test-secret", "PRISMA_LOG_JSON": "true", "PRISMA_LOG_LEVEL": "INFO",
            "PRISMA_JOB_LEASE_S": str(LEASE_S), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            # Two cores are shared by every process: one thread each; int8 (CTranslate2), the CPU path of a
            # CPU without bf16, as deterministic on one thread as fp32 (a resumed run equals the baseline).
            "PRISMA_EMBEDDER_THREADS": "1", "PRISMA_SAE_THREADS": "1", "PRISMA_EMBEDDER_PRECISION": "int8",
            "OMP_NUM_THREADS": "1", "PRISMA_EMBEDDER_PROGRESS_INTERVAL_S": "0.2",
            "PRISMA_EMBEDDER_CLAIM_LEASE_S": str(LEASE_S), "PRISMA_EMBEDDER_CLAIM_POLL_S": "0.3",
            "PRISMA_EMBEDDER_HELPERS": "1",
            # The machinery encoder, as everywhere but where the default model is the subject.
            "PRISMA_EMBEDDER_DEFAULT_MODEL": MACHINERY_ENCODER,
            "PRISMA_INTERPRETER_EMBEDDER_URL": self.url("embedder"),
            **{f"PRISMA_{n.upper()}_URL": self.url(n) for n in SERVICE_PORTS},
        })
        keep.update(self.extra_env)
        return keep

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    # -- processes ---------------------------------------------------------------------
    def _proc(self, name: str, args: list[str]) -> Proc:
        proc = Proc(name, args, self.env(), self.root / f"{name}.log")
        self.procs[name] = proc
        return proc

    def start_redis(self) -> None:
        (self.root / "redis").mkdir(exist_ok=True)
        self._proc("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                             "--dir", str(self.root / "redis"), "--appendonly", "yes", "--appendfsync", "always",
                             "--save", ""]).start()
        wait_until(self.redis_ping, 20, "redis")

    def redis_ping(self) -> bool:
        out = subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True, text=True)
        return out.stdout.strip() == "PONG"

    def restart_redis(self, down_s: float = 1.0) -> None:
        """SHUTDOWN (the append-only file is flushed), a pause, then the same server again."""
        subprocess.run(["redis-cli", "-p", str(self.redis_port), "shutdown"], capture_output=True)
        self.procs["redis"].popen.wait(timeout=20)
        time.sleep(down_s)
        self.procs["redis"].start()
        wait_until(self.redis_ping, 20, "redis after restart")

    def prisma(self, *args: str) -> str:
        out = subprocess.run([PRISMA, *args], env=self.env(), capture_output=True, text=True, cwd=REPO_ROOT)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def start_service(self, name: str) -> None:
        self._proc(name, [PRISMA, "service", name, "--port", str(self.ports[name])]).start()

    def start_worker(self, queue: str, suffix: str = "") -> Proc:
        return self._proc(f"{queue}-worker{suffix}", [PRISMA, "worker", queue]).start()

    def start_gateway(self, workers: int = 1) -> None:
        self._proc("gateway", [PRISMA, "serve", "--port", str(self.ports["gateway"]), "--workers", str(workers)]).start()

    def healthy(self, name: str) -> bool:
        try:
            return HTTP.get(f"{self.url(name)}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_healthy(self, *names: str, timeout: float = 180) -> None:
        for name in names:
            proc = self.procs[name]

            def up(name: str = name, proc: Proc = proc) -> bool:
                if not proc.alive:
                    raise RuntimeError(f"{name} exited; its log ends:\n{proc.log_text()[-3000:]}")
                return self.healthy(name)

            wait_until(up, timeout, f"{name} /health")

    def wait_worker_ready(self, proc: Proc, timeout: float = 180) -> None:
        """`prisma worker` logs 'worker ready' once its start-up (models loaded) is done."""
        def ready() -> bool:
            if not proc.alive:
                raise RuntimeError(f"{proc.name} exited; its log ends:\n{proc.log_text()[-3000:]}")
            return "worker ready" in proc.log_since_start()

        wait_until(ready, timeout, f"{proc.name} ready")

    def start_all(self, gateway_workers: int = 1) -> None:
        self.start_redis()
        self.prisma("db", "upgrade")
        self.api_key = self.prisma("apikey", "create", "--name", "distributed").strip().splitlines()[-1]
        for name in SERVICE_PORTS:
            self.start_service(name)
        for queue in QUEUES:
            self.start_worker(queue)
        self.start_gateway(gateway_workers)
        self.wait_healthy(*SERVICE_PORTS, "gateway")
        for queue in QUEUES:
            self.wait_worker_ready(self.procs[f"{queue}-worker"])

    def stop_all(self) -> None:
        for proc in reversed(list(self.procs.values())):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"===== {p.name}\n{p.log_text()[-4000:]}" for p in self.procs.values())

    # -- the API, as a client ----------------------------------------------------------
    def get(self, path: str, **kw) -> httpx.Response:  # noqa: ANN003
        return HTTP.get(f"{self.url()}{path}", headers=self.headers(), timeout=30, **kw)

    def post(self, path: str, **kw) -> httpx.Response:  # noqa: ANN003
        return HTTP.post(f"{self.url()}{path}", headers=self.headers(), timeout=120, **kw)

    def wait_done(self, path: str, timeout: float = 240) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            resp = self.get(path)
            if resp.status_code == 200 and resp.json()["status"] in TERMINAL:
                return resp.json()
            time.sleep(0.3)
        raise TimeoutError(f"{path} not finished in {timeout:.0f} s\n{self.logs()}")
