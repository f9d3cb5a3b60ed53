"""Users, roles, projects and keys beyond the matrix: another project's objects answer as missing ones
(by path and by body), lists hold only the caller's projects, keys expire and can be read-only,
datasets go into a project, administrators manage accounts (API and CLI), the dashboard shows the
current project and hides what a viewer cannot do."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import select

from gateway.domain.auth.models import ApiKey
from tests.gateway.roles_world import World

pytestmark = pytest.mark.anyio


@pytest.fixture
def role_app(app):  # noqa: ANN001, ANN201
    """These tests on SQLite and on PostgreSQL (the matrix runs on SQLite only, to stay fast)."""
    return app
MISSING = 999_999
SAE = {"k": 2, "expansion_factor": 2, "epochs": 1}


def without_ids(body: dict) -> str:
    return re.sub(r"\d+", "N", str(body))


async def test_another_projects_objects_answer_as_missing_ones(world: World, clients) -> None:  # noqa: ANN001
    other, ids = clients["other"], world.ids
    pairs = [
        ("GET", "/api/v1/datasets/{}", ids["dataset_id"], None),
        ("GET", "/api/v1/sae-runs/{}/features", ids["sae_run_id"], None),
        ("POST", "/api/v1/concepts/{}/apply", ids["concept_id"], None),
        ("POST", "/api/v1/embedding-runs", ids["dataset_id"], lambda i: {"dataset_id": i}),
        ("POST", "/api/v1/sae-runs", ids["embedding_run_id"], lambda i: {"embedding_run_id": i, "config": SAE}),
        ("POST", "/api/v1/concepts", ids["sae_run_id"],
         lambda i: {"sae_run_id": i, "name": "x", "kind": "expression", "expression": "F1 > 0"}),
    ]
    for method, template, real, body in pairs:
        answers = []
        for object_id in (real, MISSING):
            path = template.format(object_id) if "{}" in template else template
            resp = await other.request(method, path, json=body(object_id) if body else None)
            answers.append((resp.status_code, without_ids(resp.json())))
        assert answers[0] == answers[1], f"{method} {template}: {answers}"
        assert answers[0][0] in (404, 422)
    # ... and to a member, the same object is there.
    assert (await clients["viewer"].get(f"/api/v1/datasets/{ids['dataset_id']}")).status_code == 200


async def test_lists_hold_only_the_callers_projects(world: World, clients) -> None:  # noqa: ANN001
    for caller, expected in (("viewer", 1), ("admin", 1), ("other", 0)):
        for path in ("/api/v1/datasets", "/api/v1/jobs", "/api/v1/concepts", "/api/v1/embedding-runs"):
            body = (await clients[caller].get(path)).json()
            assert body["total"] == expected, f"{caller} {path}: {body['total']}"
        assert len((await clients[caller].get("/api/v1/sae-runs")).json()["items"]) == expected
    dataset_filter = await clients["other"].get("/api/v1/embedding-runs", params={"dataset_id": world.ids["dataset_id"]})
    assert dataset_filter.json()["total"] == 0


async def test_a_viewer_is_refused_before_the_body_is_read(clients) -> None:  # noqa: ANN001
    resp = await clients["viewer"].post("/api/v1/sae-runs", json={"nonsense": True})
    assert resp.status_code == 403 and "viewer" in resp.json()["detail"]
    resp = await clients["read_only"].post("/api/v1/sae-runs", json={"nonsense": True})
    assert resp.status_code == 403 and "read-only" in resp.json()["detail"]
    assert (await clients["editor"].post("/api/v1/sae-runs", json={"nonsense": True})).status_code == 422


async def test_keys_expire_and_cannot_be_created_expired(role_app, clients) -> None:  # noqa: ANN001
    admin = clients["admin"]
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    made = await admin.post("/api/v1/api-keys", json={"name": "temp", "user": "u-viewer", "expires_at": soon})
    assert made.status_code == 201 and made.json()["expires_at"] is not None
    key = made.json()["key"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=role_app), base_url="https://prisma.test",
                                 headers={"Authorization": f"Bearer {key}"}) as temp:
        me = (await temp.get("/api/v1/me")).json()
        assert me["user"] == "u-viewer" and me["role"] == "viewer" and [p["name"] for p in me["projects"]] == ["alpha"]
        with role_app.state.factory() as session:  # the hour passes
            row = session.scalar(select(ApiKey).where(ApiKey.name == "temp"))
            row.expires_at = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
            session.commit()
        assert (await temp.get("/api/v1/me")).status_code == 401
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    refused = await admin.post("/api/v1/api-keys", json={"name": "old", "expires_at": past})
    assert refused.status_code == 422 and refused.json()["field"] == "expires_at"


async def test_admin_manages_users_projects_members_and_read_only_keys(role_app, clients) -> None:  # noqa: ANN001
    admin = clients["admin"]
    assert (await admin.post("/api/v1/users", json={"name": "rita", "role": "editor"})).status_code == 201
    assert (await admin.post("/api/v1/users", json={"name": "rita", "role": "viewer"})).status_code == 409
    bad_role = await admin.post("/api/v1/users", json={"name": "x", "role": "root"})
    assert bad_role.status_code == 422 and bad_role.json()["field"].endswith("role")
    project = (await admin.post("/api/v1/projects", json={"name": "gamma"})).json()
    added = await admin.post(f"/api/v1/projects/{project['id']}/members", json={"user": "rita"})
    assert added.status_code == 200 and added.json()["members"] == ["rita"]
    assert (await admin.post(f"/api/v1/projects/{project['id']}/members", json={"user": "nobody"})).status_code == 404
    key = (await admin.post("/api/v1/api-keys", json={"name": "rita-ro", "user": "rita", "read_only": True})).json()
    assert key["read_only"] is True
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=role_app), base_url="https://prisma.test",
                                 headers={"Authorization": f"Bearer {key['key']}"}) as rita:
        me = (await rita.get("/api/v1/me")).json()
        assert me["role"] == "editor" and me["read_only"] and [p["name"] for p in me["projects"]] == ["gamma"]
        upload = await rita.post("/api/v1/datasets", files={"file": ("n.csv", b"text\nhello\n")})
        assert upload.status_code == 403
    users = {u["name"]: u for u in (await admin.get("/api/v1/users")).json()}
    assert users["rita"]["projects"] == ["gamma"] and users["admin"]["role"] == "admin"
    removed = await admin.delete(f"/api/v1/projects/{project['id']}/members/{users['rita']['id']}")
    assert removed.status_code == 200 and removed.json()["members"] == []


async def test_datasets_are_uploaded_into_a_project(world: World, clients) -> None:  # noqa: ANN001
    csv = ("d.csv", b"id,text\nA1,tosse\n")
    editor = clients["editor"]
    mine = await editor.post("/api/v1/datasets", files={"file": csv})  # the editor's only project
    assert mine.status_code == 201 and mine.json()["project_id"] == world.ids["project_id"]
    for other_project in ("beta", "nowhere"):  # seen or not, the same answer
        refused = await editor.post("/api/v1/datasets", files={"file": csv}, data={"project": other_project})
        assert refused.status_code == 422 and refused.json()["field"] == "project"
        assert other_project in refused.json()["detail"]
    into_beta = await clients["other"].post("/api/v1/datasets", files={"file": csv}, data={"project": "beta"})
    assert into_beta.status_code == 201
    assert into_beta.json()["id"] not in [d["id"] for d in (await editor.get("/api/v1/datasets")).json()["items"]]
    admin_default = await clients["admin"].post("/api/v1/datasets", files={"file": csv})  # admin: `default`
    me = (await clients["admin"].get("/api/v1/me")).json()
    default_id = next(p["id"] for p in me["projects"] if p["name"] == "default")
    assert admin_default.json()["project_id"] == default_id


async def test_dashboard_shows_the_project_and_hides_writes_from_viewers(world: World, clients) -> None:  # noqa: ANN001
    viewer_page = (await clients["viewer"].get("/datasets")).text
    editor_page = (await clients["editor"].get("/datasets")).text
    assert "notes" in viewer_page and 'class="project-name">alpha<' in viewer_page
    assert 'id="upload-form"' not in viewer_page and 'id="upload-form"' in editor_page
    dataset_page = f"/datasets/{world.ids['dataset_id']}"
    assert "Embed this dataset" not in (await clients["viewer"].get(dataset_page)).text
    assert "Embed this dataset" in (await clients["editor"].get(dataset_page)).text
    assert "notes" not in (await clients["other"].get("/datasets")).text
    # An admin sees every project and switches between them; the list follows the current one.
    admin = clients["admin"]
    page = (await admin.get("/datasets")).text
    assert '<select id="project-select"' in page and ">beta<" in page and ">default<" in page
    assert "notes" not in page  # the admin's current project is `default`
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    switched = await admin.post("/project", data={"project_id": str(world.ids["project_id"]), "csrf_token": token})
    assert switched.status_code == 303
    assert "notes" in (await admin.get("/datasets")).text


async def test_the_concept_form_is_an_editors_and_sees_no_other_projects_run(world: World, clients) -> None:  # noqa: ANN001
    for caller in ("viewer", "read_only"):
        page = (await clients[caller].get("/concepts/new")).text
        assert "Creating a concept needs an editor" in page and 'id="concept-form"' not in page
    assert "No SAE run of this project has finished yet" in (await clients["editor"].get("/concepts/new")).text
    other = clients["other"]
    token = re.search(r'name="csrf_token" value="([^"]+)"', (await other.get("/concepts/new")).text).group(1)
    answers = []
    for run_id in (world.ids["sae_run_id"], MISSING):  # alpha's run, and none: the same refusal
        resp = await other.post("/concepts", data={"csrf_token": token, "sae_run_id": str(run_id), "name": "x",
                                                   "kind": "expression", "expression": "F1 > 0"})
        beside = re.search(r'id="sae_run_id-error">(.*?)</p>', resp.text, re.S)
        answers.append((resp.status_code, without_ids(beside.group(1) if beside else resp.text)))
    assert answers[0] == answers[1] and answers[0][0] == 422, answers
    assert "does not exist" in answers[0][1]


def test_cli_creates_users_projects_members_and_keys(prisma_cli) -> None:  # noqa: ANN001
    from gateway.config import get_settings
    from gateway.domain.auth.service import verify_key

    assert prisma_cli("project", "create", "ward").exit_code == 0
    made = prisma_cli("user", "create", "anna", "--role", "viewer", "--project", "ward")
    assert made.exit_code == 0, made.output
    assert prisma_cli("user", "create", "anna").exit_code == 2  # taken
    assert prisma_cli("user", "create", "bob", "--role", "root").exit_code == 2
    assert prisma_cli("user", "create", "bob", "--role", "editor").exit_code == 0
    assert prisma_cli("project", "add-member", "ward", "bob").exit_code == 0
    assert prisma_cli("project", "add-member", "ward", "nobody").exit_code == 2
    listed = prisma_cli("project", "list").output
    assert re.search(r"ward\tanna,bob", listed), listed
    key = prisma_cli("apikey", "create", "--name", "bob-ro", "--user", "bob", "--read-only",
                     "--expires", "2999-01-01")
    assert key.exit_code == 0, key.output
    plain = key.stdout.strip().splitlines()[-1]
    from gateway.db import session_factory

    factory = session_factory(get_settings().sqlalchemy_url)
    with factory() as session:
        principal = verify_key(session, plain)
        assert principal.role == "editor" and principal.read_only and len(principal.project_ids) == 1
    assert "bob-ro" in prisma_cli("apikey", "revoke", "bob-ro").output
    with factory() as session:
        assert verify_key(session, plain) is None
    assert "read-only" in prisma_cli("apikey", "list").output
    assert prisma_cli("apikey", "revoke", "nope").exit_code == 2
