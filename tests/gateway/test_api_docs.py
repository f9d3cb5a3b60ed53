"""The API's reference: the schema declares how to authenticate, and the reference page's Swagger UI files
are served by the gateway itself (the page in Chromium: tests/browser/test_api_docs.py)."""

from __future__ import annotations

import httpx
import pytest

from gateway.middleware import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.anyio


async def test_the_schema_declares_the_bearer_key_and_health_needs_none(client: httpx.AsyncClient,
                                                                      auth: dict[str, str]) -> None:
    schema = (await client.get("/api/v1/openapi.json", headers=auth)).json()
    (name, scheme), = schema["components"]["securitySchemes"].items()
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    assert "Authorization: Bearer" in scheme["description"]
    assert schema["security"] == [{name: []}]  # every operation, unless it says otherwise
    assert schema["paths"]["/health"]["get"]["security"] == []
    assert all("security" not in op for path, ops in schema["paths"].items() if path != "/health"
               for op in ops.values())
    assert (await client.get("/health")).status_code == 200  # as the schema says: no key


async def test_swagger_ui_files_are_served_here_and_nothing_else(client: httpx.AsyncClient) -> None:
    js = await client.get("/api-docs/swagger-ui-bundle.js")
    css = await client.get("/api-docs/swagger-ui.css")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in js.text
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert css.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    for name in ("index.html", "swagger-initializer.js", "..%2F..%2F__init__.py", "swagger-ui.js.map"):
        assert (await client.get(f"/api-docs/{name}")).status_code == 404, name


async def test_the_reference_page_needs_a_login(client: httpx.AsyncClient) -> None:
    page = await client.get("/api-docs")
    assert page.status_code == 401 and "Log in" in page.text
    assert "swagger-ui-bundle.js" not in page.text
