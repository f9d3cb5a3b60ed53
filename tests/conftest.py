"""Shared fixtures: the gateway on SQLite (embedded) and on the real PostgreSQL, an API key,
an HTTP client over the app's ASGI transport."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from gateway.config import GatewaySettings
from gateway.migrate import upgrade

PG_ADMIN_URL = os.environ.get("PRISMA_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PRISMA_TEST_REDIS", "redis://127.0.0.1:6379/0")
REPO_ROOT = Path(__file__).resolve().parent.parent

# The machinery tests (chunking, shards, resume, search, pages...) run on the 6-layer English
# all-MiniLM-L6-v2: half the cost of the default multilingual-e5-small (12 layers), and their
# expected token counts are MiniLM's. The default itself is tested where it is the subject
# (tests/embedder/test_e5_model.py, tests/gateway/test_default_encoder.py) and by the shared demo
# (tests/browser/demo.py), which runs with the real default.
MACHINERY_ENCODER = "all-MiniLM-L6-v2"
os.environ.setdefault("PRISMA_EMBEDDER_DEFAULT_MODEL", MACHINERY_ENCODER)


def _uses_demo(item: pytest.Item) -> bool:
    return "demo" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after -k / -m have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with a test that uses the shared `prisma demo` (tests/browser/demo.py) run last,
    each kept whole and in its order, so that the demo's pipeline runs beside the rest."""
    late = {item.nodeid.split("::")[0] for item in items if _uses_demo(item)}
    items[:] = ([i for i in items if i.nodeid.split("::")[0] not in late]
                + [i for i in items if i.nodeid.split("::")[0] in late])


def _xdist_controller(config: pytest.Config) -> bool:
    """pytest-xdist's controller process (`make test` runs `-n auto`): it collects nothing itself."""
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def _may_use_demo(config: pytest.Config) -> bool:
    """Whether the paths asked for hold tests/browser (where the shared demo's users live)."""
    browser = REPO_ROOT / "tests" / "browser"
    for arg in config.args or ["tests"]:
        path = (Path(config.invocation_params.dir) / arg.split("::")[0]).resolve()
        if path == browser or browser in path.parents or path in browser.parents:
            return True
    return False


ONE_THREAD_EACH = {"OMP_NUM_THREADS": "1", "PRISMA_EMBEDDER_THREADS": "1", "PRISMA_SAE_THREADS": "1"}
"""Under pytest-xdist every process the suite starts (its workers, their servers, the shared demo) computes on
one thread: two workers and the demo already keep the cores busy, and each on every core spun OpenMP threads
against the others (on 2 cores, capped to AVX2: 466 s, 438 s with one thread each)."""


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist the controller starts the shared demo, once for every worker: the worker that
    runs tests/browser inherits its directory and port through the environment (tests/browser/demo.py).
    The workers, started after this, inherit ONE_THREAD_EACH too."""
    if _xdist_controller(config) and (config.option.numprocesses or 0) != 1:
        for name, value in ONE_THREAD_EACH.items():
            os.environ.setdefault(name, value)
    if _xdist_controller(config) and not config.option.collectonly and _may_use_demo(config):
        from tests.browser.demo import Background

        Background.start()
        Background.share()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """Each test goes to the next free worker, except that tests/browser (the shared demo's users, joined
    once, whose tests add to its concepts) runs on one worker, and so does tests/distributed (one
    deployment of eight processes a session). xdist's own `--dist loadgroup` would do this with marks,
    but with pytest 9 its group suffix never reaches the node id (`Node.nodeid` reads `_id`)."""
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerDirectories(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for directory in ("tests/browser/", "tests/distributed/"):
                if nodeid.startswith(directory):
                    return directory
            return nodeid

    return OneWorkerDirectories(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the demo in the background once the selection is known, if a selected test uses it
    (under pytest-xdist, a worker attaches to the controller's instead)."""
    if not session.config.option.collectonly and any(_uses_demo(i) for i in session.items):
        from tests.browser.demo import Background

        Background.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests.browser.demo import Background

    Background.stop()


def cpu_summary() -> str:
    """The CPU the suite ran on, for the suite's time to be read against (#29: its goal is for a CPU without bf16)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return f"{os.cpu_count()} CPUs (no /proc/cpuinfo)"

    def field(name: str) -> str:
        return next((line.split(":", 1)[1].strip() for line in info.splitlines()
                     if ":" in line and line.split(":", 1)[0].strip() == name), "?")

    model = f"{field('model name')} (family {field('cpu family')}, model {field('model')})"  # e.g. EPYC Zen 1: 23/1, Zen 3: 25/1
    flags = set(field("flags").split())
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model}, {os.cpu_count()} CPUs available, {len(os.sched_getaffinity(0))} usable; ISA: {' '.join(isa) or 'none of avx2/avx512/amx'}"


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    terminalreporter.write_line(f"CPU: {cpu_summary()}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _pg_url(dbname: str) -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{dbname}"


def create_pg_database() -> str:
    """A fresh, empty PostgreSQL database for this test process; returns its URL."""
    name = f"prisma_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return _pg_url(name)


def drop_pg_database(url: str) -> None:
    from gateway.db import get_engine

    get_engine(url).dispose()  # the app's pooled connections
    get_engine.cache_clear()
    name = url.rsplit("/", 1)[1]
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    url = create_pg_database()
    upgrade(url)
    yield url
    drop_pg_database(url)


def truncate_all(url: str) -> None:
    from gateway.models import Base

    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


_SQLITE_TEMPLATE: list[Path] = []


def migrated_sqlite_template() -> Path:
    """An empty SQLite database at the head revision, migrated once per test process: Alembic's 8
    migrations rebuild SQLite tables (`batch_alter_table`), about 0.4 s for every fresh app on two
    cores. The migrations themselves are tested from an empty file, both ways (test_migrations.py)."""
    if not _SQLITE_TEMPLATE:
        import atexit
        import tempfile

        folder = tempfile.mkdtemp(prefix="prisma-template-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        upgrade(f"sqlite:///{folder}/prisma.db")
        _SQLITE_TEMPLATE.append(Path(folder) / "prisma.db")
    return _SQLITE_TEMPLATE[0]


def make_settings(data_dir: Path, database_url: str | None = None, **overrides: object) -> GatewaySettings:
    """The gateway's settings for a test; in embedded mode (no `database_url`) a data dir without a
    database gets a copy of the migrated template, which the app's start-up migration then finds at head."""
    if database_url is None and not (data_dir / "prisma.db").exists():
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(migrated_sqlite_template(), data_dir / "prisma.db")
        (data_dir / "prisma.db").chmod(0o600)
    return GatewaySettings(
        data_dir=data_dir, database_url=database_url, redis_url=None, log_json=False, log_level="WARNING",
        secret_key="test-secret-key", auto_migrate=True, **overrides,
    )


@pytest.fixture
def settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[GatewaySettings]:
    if backend == "postgres":
        url = request.getfixturevalue("pg_database")
        truncate_all(url)
        yield make_settings(tmp_path / "data", url)
    else:
        yield make_settings(tmp_path / "data")


@pytest.fixture
def app(settings: GatewaySettings):  # noqa: ANN201
    from gateway.app import create_app

    application = create_app(settings, configure_logs=False)
    yield application
    application.state.runner.shutdown()


@pytest.fixture
def api_key(settings: GatewaySettings, app) -> str:  # noqa: ANN001
    from gateway.db import session_scope
    from gateway.domain.auth.service import create_key

    with session_scope(app.state.factory) as session:
        _, plain = create_key(session, name=f"tester-{uuid.uuid4().hex[:6]}")
    return plain


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:  # noqa: ANN001
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://prisma.test") as c:
        yield c


@pytest.fixture
def auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}
