"""The permission matrix: every route the gateway serves × {admin, editor, viewer, read-only key, another
project's editor, no key} → the expected answer. A route without an entry fails the test, and so does
an entry for a route that is gone. `MATRIX` and `served_routes` are what bench/security.py reads.

An expected cell is a status, or OK: the caller passed authentication and authorisation, and the
handler answered for itself (200, 201, 204, 303, or a 4xx about the request such as 409 or 422, never
401, 403, 404 or 5xx). The fixture holds one small dataset and rows for the objects derived from it
(no embedding, no training), so a permitted call often ends in the handler's own 409/422; the
authorisation is decided before that. Creating routes are sent an empty body: a viewer's is a 403
before it is validated. Routes that name their dataset in the body (POST /embedding-runs, /sae-runs,
/concepts, the imports) are checked by project in the tests below the matrix.
"""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from tests.gateway.roles_world import CALLERS, World

pytestmark = pytest.mark.anyio

OK = "ok"
"""Authorised: the handler's own answer, whatever it is, short of 401/403/404/5xx."""


def row(admin, editor, viewer, read_only, other, none):  # noqa: ANN001, ANN201
    return dict(zip(CALLERS, (admin, editor, viewer, read_only, other, none), strict=True))


PUBLIC = row(OK, OK, OK, OK, OK, OK)
ANY_KEY = row(OK, OK, OK, OK, OK, 401)                   # lists: each caller sees its own projects' rows
READ_IN_PROJECT = row(OK, OK, OK, OK, 404, 401)          # an object of the project: another project's is 404
WRITE = row(OK, OK, 403, 403, OK, 401)                   # creating: the project comes with the request
WRITE_IN_PROJECT = row(OK, OK, 403, 403, 404, 401)       # changing or running an object of the project
ADMIN_ONLY = row(OK, 403, 403, 403, 403, 401)
READ_BY_POST = READ_IN_PROJECT                           # a search reads, though it is a POST

MATRIX: dict[tuple[str, str], dict[str, object]] = {
    ("GET", "/health"): PUBLIC,
    ("GET", "/"): PUBLIC,
    ("GET", "/static"): PUBLIC,
    ("GET", "/login"): PUBLIC,
    ("POST", "/login"): PUBLIC,
    ("GET", "/api/v1/openapi.json"): ANY_KEY,
    ("GET", "/api/v1/me"): ANY_KEY,
    # datasets
    ("POST", "/api/v1/datasets"): WRITE,
    ("GET", "/api/v1/datasets"): ANY_KEY,
    ("GET", "/api/v1/datasets/{dataset_id}"): READ_IN_PROJECT,
    ("GET", "/api/v1/datasets/{dataset_id}/documents"): READ_IN_PROJECT,
    ("GET", "/api/v1/datasets/{dataset_id}/documents/{document_id}"): READ_IN_PROJECT,
    ("DELETE", "/api/v1/datasets/{dataset_id}"): WRITE_IN_PROJECT,
    ("POST", "/api/v1/datasets/{dataset_id}/documents"): WRITE_IN_PROJECT,  # appending notes
    # embedding runs
    ("POST", "/api/v1/embedding-runs"): WRITE,
    ("POST", "/api/v1/embedding-runs/import"): WRITE,
    ("GET", "/api/v1/embedding-runs"): ANY_KEY,
    ("GET", "/api/v1/embedding-runs/{run_id}"): READ_IN_PROJECT,
    # SAE runs, features, search
    ("POST", "/api/v1/sae-runs"): WRITE,
    ("POST", "/api/v1/sae-runs/import"): WRITE,
    ("GET", "/api/v1/sae-runs"): ANY_KEY,
    ("GET", "/api/v1/sae-runs/{run_id}"): READ_IN_PROJECT,
    ("GET", "/api/v1/sae-runs/{run_id}/features"): READ_IN_PROJECT,
    # the run has no statistics yet: the handler's own 404 for those who may read it
    ("GET", "/api/v1/sae-runs/{run_id}/features/{index}"): row(404, 404, 404, 404, 404, 401),
    ("POST", "/api/v1/sae-runs/{run_id}/interpretations"): WRITE_IN_PROJECT,
    ("GET", "/api/v1/sae-runs/{run_id}/features/{index}/interpretations"): READ_IN_PROJECT,
    ("POST", "/api/v1/sae-runs/{run_id}/features/{index}/interpretations"): WRITE_IN_PROJECT,
    ("GET", "/api/v1/sae-runs/{run_id}/families"): READ_IN_PROJECT,
    ("GET", "/api/v1/sae-runs/{run_id}/families/{family_id}"): READ_IN_PROJECT,
    ("POST", "/api/v1/sae-runs/{run_id}/search"): READ_BY_POST,
    ("POST", "/api/v1/sae-runs/{run_id}/encode"): READ_BY_POST,  # texts sent now: reads, audited
    ("POST", "/api/v1/sae-runs/{run_id}/extend"): WRITE_IN_PROJECT,  # the appended notes encoded
    ("GET", "/api/v1/sae-runs/{run_id}/documents/{document_id}"): READ_IN_PROJECT,
    # concepts
    ("POST", "/api/v1/concepts"): WRITE,
    ("GET", "/api/v1/concepts"): ANY_KEY,
    ("GET", "/api/v1/concepts/{concept_id}"): READ_IN_PROJECT,
    ("DELETE", "/api/v1/concepts/{concept_id}"): WRITE_IN_PROJECT,
    ("POST", "/api/v1/concepts/{concept_id}/evaluate"): WRITE_IN_PROJECT,
    ("POST", "/api/v1/concepts/{concept_id}/apply"): WRITE_IN_PROJECT,
    ("GET", "/api/v1/concepts/{concept_id}/export.csv"): READ_IN_PROJECT,
    ("POST", "/api/v1/concepts/{concept_id}/classify"): READ_BY_POST,  # texts sent now: reads, audited
    # labels: a labeller writes them too (tests/concepts/test_labels_api.py); the fixture's note has none
    ("GET", "/api/v1/concepts/{concept_id}/labels"): READ_IN_PROJECT,
    ("GET", "/api/v1/concepts/{concept_id}/labels/export"): READ_IN_PROJECT,
    ("GET", "/api/v1/concepts/{concept_id}/labels/{document_id}"): row(404, 404, 404, 404, 404, 401),
    ("PUT", "/api/v1/concepts/{concept_id}/labels/{document_id}"): WRITE_IN_PROJECT,
    ("DELETE", "/api/v1/concepts/{concept_id}/labels/{document_id}"): row(404, 404, 403, 403, 404, 401),
    ("POST", "/api/v1/concepts/{concept_id}/labels/{document_id}/undo"): WRITE_IN_PROJECT,
    ("POST", "/api/v1/concepts/{concept_id}/labels/import"): WRITE_IN_PROJECT,
    ("POST", "/api/v1/concepts/{concept_id}/queue"): WRITE_IN_PROJECT,
    ("POST", "/api/v1/concepts/{concept_id}/retrain"): WRITE_IN_PROJECT,
    # jobs
    ("GET", "/api/v1/jobs"): ANY_KEY,
    ("GET", "/api/v1/jobs/{job_id}"): READ_IN_PROJECT,
    ("POST", "/api/v1/jobs/{job_id}/cancel"): WRITE_IN_PROJECT,
    # administration
    ("GET", "/api/v1/api-keys"): ADMIN_ONLY,
    ("POST", "/api/v1/api-keys"): ADMIN_ONLY,
    ("DELETE", "/api/v1/api-keys/{key_id}"): ADMIN_ONLY,
    ("GET", "/api/v1/audit-events"): ADMIN_ONLY,
    ("GET", "/api/v1/users"): ADMIN_ONLY,
    ("POST", "/api/v1/users"): ADMIN_ONLY,
    ("GET", "/api/v1/projects"): ADMIN_ONLY,
    ("POST", "/api/v1/projects"): ADMIN_ONLY,
    ("POST", "/api/v1/projects/{project_id}/members"): ADMIN_ONLY,
    ("DELETE", "/api/v1/projects/{project_id}/members/{user_id}"): ADMIN_ONLY,
    # dashboard (no key: the login page, 401)
    ("POST", "/logout"): ANY_KEY,
    ("POST", "/project"): row(OK, OK, OK, OK, 404, 401),  # switching to the fixture's project
    ("GET", "/datasets"): ANY_KEY,
    ("POST", "/datasets/upload"): WRITE,
    ("GET", "/datasets/{dataset_id}"): READ_IN_PROJECT,
    ("GET", "/jobs"): ANY_KEY,
    ("GET", "/jobs/{job_id}"): READ_IN_PROJECT,
    ("POST", "/datasets/{dataset_id}/embed"): WRITE_IN_PROJECT,
    ("POST", "/datasets/{dataset_id}/delete"): WRITE_IN_PROJECT,
    ("GET", "/embedding-runs/{run_id}"): READ_IN_PROJECT,
    ("POST", "/embedding-runs/{run_id}/sae"): WRITE_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}"): READ_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}/features"): READ_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}/features/{index}"): row(404, 404, 404, 404, 404, 401),  # no statistics yet
    ("GET", "/sae-runs/{run_id}/families"): READ_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}/sweep"): row(404, 404, 404, 404, 404, 401),  # this run is alone, not in a sweep
    ("POST", "/sae-runs/{run_id}/interpret"): WRITE_IN_PROJECT,
    ("POST", "/sae-runs/{run_id}/extend"): WRITE_IN_PROJECT,  # "Encode the new notes"
    ("POST", "/sae-runs/{run_id}/features/{index}/reinterpret"): WRITE_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}/features/{index}/examples"): READ_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}/search"): READ_IN_PROJECT,
    ("GET", "/sae-runs/{run_id}/search/suggest"): READ_IN_PROJECT,
    ("POST", "/sae-runs/{run_id}/label"): WRITE_IN_PROJECT,  # "Label these": creates a concept
    ("POST", "/sae-runs/{run_id}/paste"): READ_BY_POST,  # a pasted note read: tests/gateway/test_paste_pages.py
    ("GET", "/sae-runs/{run_id}/documents/{document_id}"): READ_IN_PROJECT,
    ("GET", "/concepts"): ANY_KEY,
    ("GET", "/concepts/new"): ANY_KEY,                   # the form lists the caller's own project's runs
    ("POST", "/concepts"): WRITE,                        # the SAE run in the form: by project in test_roles.py
    ("GET", "/concepts/{concept_id}"): READ_IN_PROJECT,
    ("GET", "/concepts/{concept_id}/apply"): READ_IN_PROJECT,
    ("POST", "/concepts/{concept_id}/apply"): WRITE_IN_PROJECT,
    ("POST", "/concepts/{concept_id}/delete"): WRITE_IN_PROJECT,
    ("POST", "/concepts/{concept_id}/try"): READ_BY_POST,  # a pasted note decided
    ("GET", "/concepts/{concept_id}/label"): READ_IN_PROJECT,      # a viewer reads it, is handed no note
    ("GET", "/concepts/{concept_id}/label/status"): READ_IN_PROJECT,
    ("POST", "/concepts/{concept_id}/label/answer"): WRITE_IN_PROJECT,  # a labeller too: tests/gateway/test_label_pages.py
    ("POST", "/concepts/{concept_id}/label/undo"): WRITE_IN_PROJECT,
    ("GET", "/audit"): ADMIN_ONLY,
    ("GET", "/api-docs"): ANY_KEY,                       # the API reference: any caller who can log in
    ("GET", "/api-docs/{name}"): PUBLIC,                 # Swagger UI's own files, as /static
}


def served_routes(app) -> set[tuple[str, str]]:  # noqa: ANN001
    """Every (method, path template) the app serves, included routers flattened (HEAD and OPTIONS aside)."""
    return {(method, ctx.path) for ctx in iter_route_contexts(app.routes)
            for method in (ctx.methods or {"GET"}) - {"HEAD", "OPTIONS"}}


def concrete(method: str, template: str, world: World) -> str:
    """The template with the fixture's ids; a fresh object where the call destroys it."""
    if template == "/static":
        return "/static/prisma.css"
    if template == "/api-docs/{name}":
        return "/api-docs/swagger-ui-bundle.js"

    def value(match: re.Match) -> str:
        name = match.group(1)
        if (method == "DELETE" or template.endswith("/delete")) and name in world.fresh:
            return str(world.fresh[name]())
        if name == "run_id":
            return str(world.ids["sae_run_id" if "/sae-runs/" in template else "embedding_run_id"])
        if name == "key_id":
            return str(world.fresh["key_id"]())
        return str(world.ids[name])

    return re.sub(r"\{([^}:]+)[^}]*\}", value, template)


async def call(client: httpx.AsyncClient, method: str, path: str, *, dashboard: bool, world: World) -> httpx.Response:
    if method == "GET":
        return await client.get(path)
    if not dashboard:
        return await client.request(method, path, json={})
    page = await client.get("/login")  # a session cookie and its CSRF token (logout clears them)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    data = {"csrf_token": token}
    if path == "/project":
        data["project_id"] = str(world.ids["project_id"])
    return await client.request(method, path, data=data, headers={"X-CSRF-Token": token})


def verdict(expected: object, status: int) -> bool:
    if expected == OK:
        return status < 500 and status not in (401, 403, 404)
    return status == expected


def test_every_served_route_has_an_entry(role_app) -> None:  # noqa: ANN001
    served = served_routes(role_app)
    assert len(served) >= 60  # the enumeration really sees the app's routes
    missing = sorted(served - MATRIX.keys())
    assert not missing, f"routes with no entry in the permission matrix: {missing}"
    stale = sorted(MATRIX.keys() - served)
    assert not stale, f"matrix entries for routes the app no longer serves: {stale}"


async def test_permission_matrix(role_app, world: World, clients: dict[str, httpx.AsyncClient]) -> None:  # noqa: ANN001
    wrong = []
    for (method, template), expected in sorted(MATRIX.items()):
        dashboard = not template.startswith("/api/") and template not in ("/health", "/static", "/", "/login")
        for caller in CALLERS:
            path = concrete(method, template, world)
            resp = await call(clients[caller], method, path, dashboard=dashboard, world=world)
            if not verdict(expected[caller], resp.status_code):
                wrong.append(f"{method} {template} as {caller}: {resp.status_code}, expected {expected[caller]}")
    assert not wrong, "\n".join(wrong)
