"""Fixtures of the gateway's permission tests (test_permissions.py, test_roles.py), and the command line's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_settings
from tests.gateway.roles_world import CALLERS, World, build_world


@pytest.fixture
def role_app(tmp_path: Path):  # noqa: ANN201
    """The gateway on SQLite (a test module may override this with the `app` of both back-ends)."""
    from gateway.app import create_app

    application = create_app(make_settings(tmp_path / "data"), configure_logs=False)
    yield application
    application.state.runner.shutdown()


@pytest.fixture
def world(role_app) -> World:  # noqa: ANN001
    return build_world(role_app.state.factory)


@pytest.fixture
async def clients(role_app, world: World) -> AsyncIterator[dict[str, httpx.AsyncClient]]:  # noqa: ANN001
    """One client per caller, over https (the session cookie is Secure), each with its key if any."""
    made = {}
    for caller in CALLERS:
        headers = {"Authorization": f"Bearer {world.keys[caller]}"} if caller in world.keys else {}
        made[caller] = httpx.AsyncClient(transport=httpx.ASGITransport(app=role_app), base_url="https://prisma.test",
                                         headers=headers)
    yield made
    for c in made.values():
        await c.aclose()


@pytest.fixture
def prisma_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., object]]:
    """`prisma ARGS...` through typer's CliRunner, in embedded mode on a fresh data directory
    (tmp_path / "data"); its SQLite engine is disposed afterwards (other engines stay cached)."""
    from typer.testing import CliRunner

    from gateway.cli import app as cli
    from gateway.config import get_settings
    from gateway.db import get_engine

    for var in ("DATABASE_URL", "REDIS_URL", "ARTIFACT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PRISMA_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    runner = CliRunner()
    try:
        yield lambda *args: runner.invoke(cli, list(args))
    finally:
        get_engine(get_settings().sqlalchemy_url).dispose()
        get_settings.cache_clear()
