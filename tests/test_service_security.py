"""The service apps (embedder, SAE, interpreter): no docs or schema routes; the bearer token is
compared as bytes, so any header (non-ASCII, binary) is a 401, never a 500; without a token a
service answers only callers on loopback, and `prisma service` refuses to start off loopback."""

from __future__ import annotations

import httpx
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from contracts.service_security import check_bind, is_loopback, token_matches

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token"
# (service, a protected route) for each app
ROUTES = {"embedder": "/embed", "sae": "/encode", "interpreter": "/examples"}


def make_app(service: str, tmp_path, token: str | None):  # noqa: ANN001, ANN201
    secret = SecretStr(token) if token else None
    if service == "embedder":
        from services.embedder.app import create_app
        from services.embedder.config import EmbedderSettings

        return create_app(EmbedderSettings(device="cpu", precision="fp32", threads=1, service_token=secret))
    if service == "sae":
        from services.sae.app import create_app
        from services.sae.config import SaeSettings

        return create_app(SaeSettings(artifact_root=str(tmp_path), service_token=secret))
    from services.interpreter.app import create_app
    from services.interpreter.config import InterpreterSettings

    async def no_embed(texts: list[str]):  # noqa: ANN202
        raise AssertionError("not called")

    return create_app(InterpreterSettings(artifact_root=str(tmp_path), service_token=secret), embed_texts=no_embed)


def client(app, base_url: str = "http://127.0.0.1:8001") -> httpx.AsyncClient:  # noqa: ANN001
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


@pytest.mark.parametrize("service", list(ROUTES))
async def test_no_docs_routes(service: str, tmp_path) -> None:  # noqa: ANN001
    async with client(make_app(service, tmp_path, TOKEN)) as c:
        for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
            resp = await c.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
            assert resp.status_code == 404, (service, path)
        assert (await c.get("/health")).status_code == 200


@pytest.mark.parametrize("service", list(ROUTES))
async def test_any_token_header_is_401_never_500(service: str, tmp_path) -> None:  # noqa: ANN001
    async with client(make_app(service, tmp_path, TOKEN)) as c:
        for header in ["Bearer " + "é" * 12, "Bearer wrong", "Basic " + TOKEN, TOKEN, "", "Bearer ", "Bearer \u00ff\u00fe",
                       b"Bearer \xff\xfe\x00".decode("latin-1")]:
            resp = await c.post(ROUTES[service], json={}, headers={"Authorization": header.encode("latin-1", "replace")
                                                                   if header.isascii() else header.encode("utf-8")})
            assert resp.status_code == 401, (service, header, resp.status_code)
        assert (await c.post(ROUTES[service], json={})).status_code == 401  # no header at all
        right = await c.post(ROUTES[service], json={}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 422  # through the check; the empty body is what is wrong


@pytest.mark.parametrize("service", list(ROUTES))
async def test_without_a_token_only_loopback_callers(service: str, tmp_path) -> None:  # noqa: ANN001
    app = make_app(service, tmp_path, None)
    async with client(app, "http://10.1.2.3:8001") as lan:
        assert (await lan.post(ROUTES[service], json={})).status_code == 401
        assert (await lan.get("/health")).status_code == 200
    async with client(app, "http://127.0.0.1:8001") as local:
        assert (await local.post(ROUTES[service], json={})).status_code == 422
    async with client(app, f"http://{service}") as in_process:  # the gateway's embedded-mode transport
        assert (await in_process.post(ROUTES[service], json={})).status_code == 422


def test_token_and_bind_rules() -> None:
    assert token_matches(f"Bearer {TOKEN}", TOKEN) and token_matches(f"bearer  {TOKEN} ", TOKEN)
    assert not token_matches("Bearer é", TOKEN) and not token_matches(None, TOKEN)
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.2", "embedder", ""))
    check_bind("sae", "0.0.0.0", TOKEN)
    check_bind("sae", "127.0.0.1", None)


@pytest.mark.parametrize("service", list(ROUTES))
def test_prisma_service_refuses_a_public_address_without_a_token(service: str, monkeypatch) -> None:
    import uvicorn

    from gateway.cli import app as cli

    started: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, **kw: started.append(host))
    for var in ("PRISMA_SERVICE_TOKEN", f"PRISMA_{service.upper()}_SERVICE_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(f"PRISMA_{service.upper()}_ARTIFACT_ROOT", "/tmp/prisma-test-artifacts")
    config = __import__(f"services.{service}.config", fromlist=["get_settings"])
    config.get_settings.cache_clear()
    refused = CliRunner().invoke(cli, ["service", service, "--host", "0.0.0.0"])
    assert refused.exit_code == 2 and "without a token" in refused.output and "PRISMA_SERVICE_TOKEN" in refused.output
    assert CliRunner().invoke(cli, ["service", service, "--host", "127.0.0.1"]).exit_code == 0
    monkeypatch.setenv("PRISMA_SERVICE_TOKEN", TOKEN)
    config.get_settings.cache_clear()
    assert CliRunner().invoke(cli, ["service", service, "--host", "0.0.0.0"]).exit_code == 0
    config.get_settings.cache_clear()
    assert started == ["127.0.0.1", "0.0.0.0"]
