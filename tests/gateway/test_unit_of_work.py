"""A request's writes are committed before its response is sent, over real HTTP (uvicorn on loopback):
a client that calls again as soon as it has its answer reads what it wrote, and a commit that fails is
that request's error, never a 201 for a write that was then lost."""

from __future__ import annotations

import re
import threading

import httpx
from sqlalchemy import event, select

from gateway.domain.auth.models import ApiKey, DashboardSession
from gateway.domain.auth.service import create_key
from tests.live import serve_in_thread

FRESH = "fresh-key"


def mark_added(factory, wanted, flag: str) -> None:  # noqa: ANN001
    """Sessions of `factory` that add an object `wanted(obj)` holds for say so in their `info[flag]`
    (the identity map holds its objects weakly: by the commit the handler's may be gone from it)."""

    def added(session, instance) -> None:  # noqa: ANN001
        if wanted(instance):
            session.info[flag] = True

    event.listen(factory, "transient_to_pending", added)


def mark_fresh_keys(factory) -> None:  # noqa: ANN001
    mark_added(factory, lambda o: isinstance(o, ApiKey) and o.name == FRESH, "fresh key")


def _holds_fresh_key(session) -> bool:  # noqa: ANN001
    return bool(session.info.get("fresh key"))


def test_the_next_request_reads_what_the_last_one_wrote(app, auth: dict[str, str]) -> None:  # noqa: ANN001
    """The commit of the request that creates a key waits (up to 3 s) for the next request, from another
    connection (another system told of the new key), to have been answered: had the response gone out
    before the commit, that next request would list the keys without the new one."""
    answered, held = threading.Event(), []

    def slow_commit(session) -> None:  # noqa: ANN001
        if not held and _holds_fresh_key(session):
            held.append(True)
            answered.wait(3)

    mark_fresh_keys(app.state.factory)
    event.listen(app.state.factory, "before_commit", slow_commit)
    with app.state.factory() as session:  # another caller's key: the writer's own last use is not committed yet
        reading_key = create_key(session, name="reader")[1]
        session.commit()
    with serve_in_thread(app, "the gateway") as url, httpx.Client(base_url=url, headers=auth, timeout=30) as writer, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {reading_key}"}, timeout=30) as reader:
        reader.get("/api/v1/api-keys").raise_for_status()  # its key's last use is now recorded: no write below
        created = writer.post("/api/v1/api-keys", json={"name": FRESH})
        listed = reader.get("/api/v1/api-keys")  # its own connection: uvicorn answers one after the other on one
        answered.set()
    assert held, "the creating request never committed"
    assert created.status_code == 201, created.text
    assert FRESH in [k["name"] for k in listed.json()]


def test_a_failed_commit_is_the_requests_error_and_nothing_is_stored(app, auth: dict[str, str]) -> None:  # noqa: ANN001
    def failing_commit(session) -> None:  # noqa: ANN001
        if _holds_fresh_key(session):
            raise RuntimeError("the database went away")

    mark_fresh_keys(app.state.factory)
    event.listen(app.state.factory, "before_commit", failing_commit)
    with serve_in_thread(app, "the gateway") as url, httpx.Client(base_url=url, headers=auth, timeout=30) as client:
        created = client.post("/api/v1/api-keys", json={"name": FRESH})
    event.remove(app.state.factory, "before_commit", failing_commit)
    assert created.status_code == 500, created.text
    assert FRESH not in created.text  # no key, no name echoed as if it had been made
    with app.state.factory() as session:
        assert session.scalars(select(ApiKey).where(ApiKey.name == FRESH)).first() is None


def test_the_login_redirect_finds_its_session(app, api_key: str) -> None:  # noqa: ANN001
    """The browser follows the login's redirect at once, possibly on another connection: the session the
    login made must be there when its cookie arrives (the commit is held until that request is answered)."""
    answered, held = threading.Event(), []
    mark_added(app.state.factory, lambda o: isinstance(o, DashboardSession), "login")

    def slow_commit(session) -> None:  # noqa: ANN001
        if not held and session.info.get("login"):
            held.append(True)
            answered.wait(3)

    event.listen(app.state.factory, "before_commit", slow_commit)
    with serve_in_thread(app, "the gateway") as url, httpx.Client(base_url=url, timeout=30) as browser:
        page = browser.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        login = browser.post("/login", data={"key": api_key, "csrf_token": token})
        cookie = login.headers["set-cookie"].split(";", 1)[0]  # Secure: httpx keeps it for https only
        with httpx.Client(base_url=url, headers={"Cookie": cookie}, timeout=30) as redirected:
            datasets = redirected.get(login.headers["location"])
        answered.set()
    assert held and login.status_code == 303
    assert datasets.status_code == 200, datasets.text[:300]
