"""Security review fixes on the real app: a non-ASCII CSRF token is a 403, security headers on every
response, the session cookie Secure except on plain loopback http, logout ends the session for every
copy of the cookie, and the data dir's files are owner-only."""

from __future__ import annotations

import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateway.middleware import CONTENT_SECURITY_POLICY

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]
TEMPLATES = Path(__file__).resolve().parents[2] / "web" / "templates"


def asgi_client(app, base_url: str) -> httpx.AsyncClient:  # noqa: ANN001
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


@pytest.fixture
async def loopback(app) -> AsyncIterator[httpx.AsyncClient]:  # noqa: ANN001
    """A browser on the server's machine: plain http to 127.0.0.1."""
    async with asgi_client(app, "http://127.0.0.1:8000") as c:
        yield c


async def csrf_of(client: httpx.AsyncClient, path: str = "/login") -> str:
    page = await client.get(path)
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


async def log_in(client: httpx.AsyncClient, api_key: str) -> None:
    resp = await client.post("/login", data={"key": api_key, "csrf_token": await csrf_of(client)})
    assert resp.status_code == 303, resp.text


async def test_non_ascii_csrf_token_is_403(loopback: httpx.AsyncClient, api_key: str) -> None:
    await csrf_of(loopback)  # the session has a token to compare with
    for form, headers in [({"csrf_token": "é" * 43}, {}), ({}, {"X-CSRF-Token": "é".encode()}),
                          ({}, {"X-CSRF-Token": b"\xff\xfe"}), ({"csrf_token": "🔑\u2028"}, {})]:
        resp = await loopback.post("/login", data={"key": api_key, **form}, headers=headers)
        assert resp.status_code == 403 and "CSRF" in resp.text, resp.text


async def test_security_headers_on_every_response(app, client: httpx.AsyncClient, auth) -> None:  # noqa: ANN001
    for path, headers in [("/health", {}), ("/login", {}), ("/static/prisma.css", {}), ("/api/v1/datasets", {}),
                          ("/api/v1/datasets", auth), ("/datasets", auth), ("/nowhere", {})]:
        resp = await client.get(path, headers=headers)
        h = resp.headers
        assert h["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        csp = h["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
        assert (h["x-frame-options"], h["x-content-type-options"], h["referrer-policy"]) == (
            "DENY", "nosniff", "no-referrer"), path
        assert "strict-transport-security" not in h  # plain http: HSTS means nothing there
    async with asgi_client(app, "https://prisma.test") as tls:
        assert (await tls.get("/health")).headers["strict-transport-security"] == "max-age=31536000"
    # The pages keep working under the policy: no inline script, style or event handler in any template.
    for template in TEMPLATES.rglob("*.html"):
        html = template.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=|javascript:", html), template


async def test_session_cookie_secure_unless_plain_loopback_http(app, loopback) -> None:  # noqa: ANN001
    def session_cookie(resp: httpx.Response) -> str:
        return next(v for v in resp.headers.get_list("set-cookie") if v.startswith("prisma_session="))

    assert "secure" not in session_cookie(await loopback.get("/login")).lower()
    for base in ("https://prisma.test", "http://prisma.test", "http://192.168.1.20:8000"):
        async with asgi_client(app, base) as c:
            cookie = session_cookie(await c.get("/login")).lower()
            assert "; secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie, (base, cookie)


async def test_logout_revokes_the_session_server_side(app, loopback, api_key: str) -> None:  # noqa: ANN001
    await log_in(loopback, api_key)
    stolen = loopback.cookies.get("prisma_session")
    async with asgi_client(app, "http://127.0.0.1:8000") as thief:
        thief.cookies.set("prisma_session", stolen)
        assert (await thief.get("/datasets")).status_code == 200  # a copy works while the session lives
        out = await loopback.post("/logout", data={"csrf_token": await csrf_of(loopback, "/datasets")})
        assert out.status_code == 303
        assert (await loopback.get("/datasets")).status_code == 401
        thief.cookies.set("prisma_session", stolen)
        assert (await thief.get("/datasets")).status_code == 401  # the copy died with the session


async def test_data_dir_files_are_owner_only(app, settings, client, auth) -> None:  # noqa: ANN001
    resp = await client.post("/api/v1/datasets", files={"file": ("n.csv", b"text\nuna nota\n")}, headers=auth)
    assert resp.status_code == 201, resp.text
    data = settings.data_dir
    snapshot = next((data / "artifacts").rglob("snapshot.parquet"))
    for path in (data, data / "prisma.db", data / "uploads", data / "artifacts", snapshot):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path.relative_to(data.parent)} is {oct(mode)}"
