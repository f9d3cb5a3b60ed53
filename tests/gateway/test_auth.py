"""Authentication: every route but /health needs a key; keys are hashed at rest; writes are audited."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from sqlalchemy import select

from gateway.domain.auth.models import ApiKey, AuditEvent

pytestmark = pytest.mark.anyio
PUBLIC = {"/health", "/login", "/static", "/api-docs/{name}"}  # the last: Swagger UI's two files, as /static


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


def _routes(app) -> list[tuple[str, str]]:  # noqa: ANN001
    """Every (method, path) the app serves, included routers flattened."""
    out = []
    for ctx in iter_route_contexts(app.routes):
        for method in sorted((ctx.methods or {"GET"}) - {"HEAD", "OPTIONS"}):
            out.append((method, ctx.path))
    return out


async def test_every_route_but_health_requires_a_key(app, client: httpx.AsyncClient) -> None:  # noqa: ANN001
    routes = _routes(app)
    assert len(routes) >= 12  # the enumeration really sees the app's routes
    checked = 0
    for method, path in routes:
        if path in PUBLIC or path == "/":
            continue
        resp = await client.request(method, _concrete(path))
        assert resp.status_code == 401, f"{method} {path} answered {resp.status_code} without a key"
        checked += 1
    assert checked >= 10
    # A wrong key is no better than none.
    bad = {"Authorization": "Bearer prisma_000000000000_nope"}
    for method, path in routes:
        if path.startswith("/api/"):
            resp = await client.request(method, _concrete(path), headers=bad)
            assert resp.status_code == 401, f"{method} {path} accepted a wrong key"


async def test_public_routes_hold_no_data(client: httpx.AsyncClient) -> None:
    resp = await client.get("/health")
    assert resp.status_code == 200 and resp.json()["status"] == "ok"
    login = await client.get("/login")
    assert login.status_code == 200 and 'name="key"' in login.text


async def test_json_api_lives_under_api_v1(app) -> None:  # noqa: ANN001
    paths = set(app.openapi()["paths"])
    assert "/api/v1/datasets" in paths
    assert all(p.startswith("/api/v1/") or p == "/health" for p in paths), paths


async def test_key_is_hashed_at_rest_and_works(app, client, api_key: str) -> None:  # noqa: ANN001
    with app.state.factory() as session:
        stored = session.scalars(select(ApiKey)).all()
    assert stored and all(api_key not in (k.key_hash, k.prefix, k.name) for k in stored)
    assert any(api_key.split("_")[1] == k.prefix for k in stored)
    resp = await client.get("/api/v1/datasets", headers={"Authorization": f"Bearer {api_key}"})
    assert resp.status_code == 200


async def test_last_used_is_recorded_coarsely(app, client, api_key: str) -> None:  # noqa: ANN001
    """The key's last use is shown, but written at most once a minute: a write per request would
    queue concurrent requests with one key on that row's lock."""
    prefix = api_key.split("_")[1]

    def last_used():  # noqa: ANN202
        with app.state.factory() as session:
            return session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).one().last_used_at

    headers = {"Authorization": f"Bearer {api_key}"}
    assert (await client.get("/api/v1/datasets", headers=headers)).status_code == 200
    first = last_used()
    assert first is not None
    assert (await client.get("/api/v1/datasets", headers=headers)).status_code == 200
    assert last_used() == first  # within the minute: not rewritten
    with app.state.factory() as session, session.begin():
        key = session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).one()
        key.last_used_at = first - timedelta(minutes=5)
    assert (await client.get("/api/v1/datasets", headers=headers)).status_code == 200
    assert last_used() >= first  # older than a minute: written again


async def test_revoked_key_is_refused(client, auth) -> None:  # noqa: ANN001
    created = await client.post("/api/v1/api-keys", json={"name": "short-lived"}, headers=auth)
    assert created.status_code == 201
    other = {"Authorization": f"Bearer {created.json()['key']}"}
    assert (await client.get("/api/v1/datasets", headers=other)).status_code == 200
    revoked = await client.delete(f"/api/v1/api-keys/{created.json()['id']}", headers=auth)
    assert revoked.status_code == 200
    assert (await client.get("/api/v1/datasets", headers=other)).status_code == 401


async def test_writes_are_audited_without_document_text(app, client, auth) -> None:  # noqa: ANN001
    secret_text = "Paziente con bronchiolite confermata SEGRETO"
    csv = f"id,text\nA1,{secret_text}\n".encode()
    resp = await client.post("/api/v1/datasets", files={"file": ("d.csv", csv)}, headers=auth)
    assert resp.status_code == 201
    ds_id = resp.json()["id"]
    assert (await client.delete(f"/api/v1/datasets/{ds_id}", headers=auth)).status_code == 204
    events = (await client.get("/api/v1/audit-events", headers=auth)).json()
    actions = [e["action"] for e in events]
    assert "dataset.create" in actions and "dataset.delete" in actions
    create = next(e for e in events if e["action"] == "dataset.create")
    assert create["target_id"] == str(ds_id) and create["actor"].startswith("tester-")
    with app.state.factory() as session:
        dumped = repr([(e.details, e.target_id, e.actor) for e in session.scalars(select(AuditEvent))])
    assert "SEGRETO" not in dumped


@pytest.fixture
async def https_client(app):  # noqa: ANN001, ANN201
    """Over https, as a deployment serves the dashboard: the session cookie is Secure elsewhere."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://prisma.test") as c:
        yield c


async def test_dashboard_login_with_csrf(https_client: httpx.AsyncClient, api_key: str) -> None:
    client = https_client
    page = await client.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    no_csrf = await client.post("/login", data={"key": api_key})
    assert no_csrf.status_code == 403
    wrong = await client.post("/login", data={"key": "prisma_x_y", "csrf_token": token})
    assert wrong.status_code == 401 and "not valid" in wrong.text
    ok = await client.post("/login", data={"key": api_key, "csrf_token": token})
    assert ok.status_code == 303
    datasets = await client.get("/datasets")
    assert datasets.status_code == 200 and "Upload" in datasets.text
    cookie = client.cookies.get("prisma_session")
    assert cookie and api_key not in cookie
    # A forged upload without the session's CSRF token is refused.
    forged = await client.post("/datasets/upload", files={"file": ("x.csv", b"text\nhello\n")})
    assert forged.status_code == 403
