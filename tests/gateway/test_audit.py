"""The audit trail of reads and logins: reading document text (API and dashboard) leaves an event
with the caller, the dataset and the count, never the text; a wrong key leaves `auth.failed` with
the client address and no secret; a key created through the API is recorded as created by the
caller; the log is filtered by actor, action and time, in the API and on the dashboard's page."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

pytestmark = pytest.mark.anyio
SECRET_WORDS = "Mario Rossi bronchiolite grave"


async def upload(client: httpx.AsyncClient, auth: dict[str, str], n: int = 5) -> int:
    rows = "\n".join(f"n{i},{SECRET_WORDS} {i}" for i in range(n))
    resp = await client.post("/api/v1/datasets", headers=auth, files={"file": ("a.csv", f"id,text\n{rows}\n".encode())})
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


async def events(client: httpx.AsyncClient, auth: dict[str, str], **params: str) -> list[dict]:
    resp = await client.get("/api/v1/audit-events", headers=auth, params={"limit": 500, **params})
    assert resp.status_code == 200, resp.text
    return resp.json()


async def key_name(client: httpx.AsyncClient, auth: dict[str, str]) -> str:
    return (await client.get("/api/v1/api-keys", headers=auth)).json()[0]["name"]


async def test_document_reads_are_audited_without_text(client, auth) -> None:  # noqa: ANN001
    ds = await upload(client, auth)
    me = await key_name(client, auth)
    listing = await client.get(f"/api/v1/datasets/{ds}/documents?limit=3", headers={**auth, "X-Request-ID": "req-77"})
    assert listing.status_code == 200
    doc_id = listing.json()["items"][0]["id"]
    assert (await client.get(f"/api/v1/datasets/{ds}/documents/{doc_id}", headers=auth)).status_code == 200
    reads = await events(client, auth, action="documents.read")
    assert len(reads) == 2
    one, page = reads  # newest first
    assert page["actor"] == me and page["target_type"] == "dataset" and page["target_id"] == str(ds)
    assert page["details"]["count"] == 3 and page["request_id"] == "req-77"
    assert one["details"] == {"count": 1, "document_id": doc_id}
    assert datetime.fromisoformat(page["at"]) <= datetime.now(UTC).replace(tzinfo=None)
    everything = json.dumps(await events(client, auth))
    assert "Rossi" not in everything and "bronchiolite" not in everything


async def test_a_wrong_key_is_audited_without_the_secret(client, auth) -> None:  # noqa: ANN001
    wrong = "prisma_0123456789ab_thisisnotthesecretvalue"
    assert (await client.get("/api/v1/datasets", headers={"Authorization": f"Bearer {wrong}"})).status_code == 401
    assert (await client.get("/api/v1/datasets")).status_code == 401  # no key at all: not a login attempt
    assert (await client.get("/datasets", headers={"Authorization": "Bearer \u00e9t\u00e9".encode()})).status_code == 401
    failed = await events(client, auth, action="auth.failed")
    assert len(failed) == 2
    assert all(e["actor"] == "anonymous" and e["details"]["method"] == "api_key" for e in failed)
    assert {e["details"]["path"] for e in failed} == {"/api/v1/datasets", "/datasets"}
    assert all(e["details"]["client"] == "127.0.0.1" for e in failed)
    assert "thisisnotthesecret" not in json.dumps(failed)


async def test_a_wrong_dashboard_login_is_audited(app, client, auth) -> None:  # noqa: ANN001
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as browser:
        page = await browser.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        resp = await browser.post("/login", data={"key": "prisma_nope_guessedsecret", "csrf_token": token})
    assert resp.status_code == 401
    failed = await events(client, auth, action="auth.failed")
    assert len(failed) == 1 and failed[0]["details"]["method"] == "dashboard"
    assert "guessedsecret" not in json.dumps(failed)


async def test_create_key_is_recorded_as_the_creating_key(client, auth) -> None:  # noqa: ANN001
    me = await key_name(client, auth)
    created = await client.post("/api/v1/api-keys", headers=auth, json={"name": "new-colleague"})
    assert created.status_code == 201
    made = await events(client, auth, action="apikey.create")
    assert [e["actor"] for e in made if e["target_id"] == str(created.json()["id"])] == [me]
    assert all(e["actor"] != "new-colleague" for e in await events(client, auth))


async def test_audit_events_filter_by_actor_action_and_time(app, client, auth) -> None:  # noqa: ANN001
    from gateway.db import session_scope
    from gateway.domain.auth import repo

    t0 = datetime(2026, 1, 1, 12, 0)
    with session_scope(app.state.factory) as session:
        for i in range(6):
            ev = repo.add_audit_event(session, actor="alice" if i % 2 else "bob", action=f"documents.{'read' if i < 4 else 'x'}")
            ev.at = t0 + timedelta(hours=i)
    assert [e["actor"] for e in await events(client, auth, actor="alice")] == ["alice"] * 3
    assert len(await events(client, auth, action="documents.read")) == 4
    assert len(await events(client, auth, action="documents.")) == 6  # a prefix
    window = await events(client, auth, since="2026-01-01T13:00:00", until="2026-01-01T15:00:00")
    assert [e["at"] for e in window] == ["2026-01-01T14:00:00", "2026-01-01T13:00:00"]
    aware = await events(client, auth, since="2026-01-01T14:00:00+01:00", until="2026-01-01T14:00:00Z")
    assert [e["at"] for e in aware] == ["2026-01-01T13:00:00"]
    assert len(await events(client, auth, actor="bob", action="documents.read", until="2026-01-01T13:00:00")) == 1
    for params, field in [({"limit": "501"}, "limit"), ({"since": "yesterday"}, "since"), ({"actor": "a" * 101}, "actor")]:
        resp = await client.get("/api/v1/audit-events", headers=auth, params=params)
        assert resp.status_code == 422 and field in resp.text, (params, resp.text)


async def test_dashboard_audit_page_filters_escapes_and_pages(app, client, auth) -> None:  # noqa: ANN001
    from gateway.dashboard.audit_pages import EVENTS_PER_PAGE
    from gateway.db import session_scope
    from gateway.domain.auth import repo

    with session_scope(app.state.factory) as session:
        for i in range(EVENTS_PER_PAGE + 5):
            repo.add_audit_event(session, actor="<script>alert(1)</script>", action="documents.read",
                                 details={"count": i})
    nav = await client.get("/datasets", headers=auth)
    assert 'href="/audit"' in nav.text
    page = await client.get("/audit", headers=auth, params={"action": "documents.read"})
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert page.text.count("<tr>") == EVENTS_PER_PAGE + 1  # the header row, then one page
    assert f"offset={EVENTS_PER_PAGE}&amp;action=documents.read" in page.text
    second = await client.get("/audit", headers=auth, params={"action": "documents.read", "offset": EVENTS_PER_PAGE})
    assert second.text.count("<tr>") == 5 + 1
    none = await client.get("/audit", headers=auth, params={"actor": "nobody"})
    assert "No event matches" in none.text
    bad = await client.get("/audit", headers=auth, params={"since": "not a time"})
    assert bad.status_code == 422 and "since" in bad.text
    assert (await client.get("/audit")).status_code == 401
