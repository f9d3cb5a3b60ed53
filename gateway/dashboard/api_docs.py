"""The API's reference page, as FastAPI's /docs would show it but served offline: Swagger UI's own files
from the locked `swagger-ui-bundle-v2` package (Apache-2.0; no CDN), the schema read from
/api/v1/openapi.json with the dashboard's session, requests tried with the session or with a key given to
"Authorize" (the schema declares the bearer scheme: `documented_openapi`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request, status
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, Response
from swagger_ui_bundle import swagger_ui_path

from gateway.dashboard.views import render

router = APIRouter(include_in_schema=False)  # the page: behind the dashboard's login and policy
assets = APIRouter(include_in_schema=False)  # Swagger UI's two files: public, like /static
SWAGGER_UI = Path(str(swagger_ui_path))
ASSETS = {"swagger-ui.css": "text/css; charset=utf-8", "swagger-ui-bundle.js": "text/javascript; charset=utf-8"}
SECURITY_SCHEME = "apiKey"
AUTH_HELP = ("An API key, sent as `Authorization: Bearer <key>`: `prisma apikey create --name NAME` prints one, and an "
             "administrator's `POST /api/v1/api-keys` makes one for a user. In a browser logged into the dashboard, "
             "its session authenticates too. Every route but `/health` needs one of the two.")


@router.get("/api-docs", response_class=HTMLResponse)
def api_docs(request: Request) -> Response:
    """Under the dashboard's own content-security policy: scripts and styles from this server only (Swagger UI's
    files, and /static/api-docs.js to start it), no inline script."""
    return render(request, "pages/api_docs.html", {"schema_url": "/api/v1/openapi.json"})


@assets.get("/api-docs/{name}")
def api_docs_asset(name: str) -> FileResponse:
    if name not in ASSETS:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no file {name!r} here")
    return FileResponse(SWAGGER_UI / name, media_type=ASSETS[name], headers={"cache-control": "public, max-age=86400"})


def documented_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema of `app`, made once, with the bearer scheme every route but /health requires (so
    clients generated from it, and Swagger UI's "Authorize", know how to authenticate)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schema.setdefault("components", {})["securitySchemes"] = {
            SECURITY_SCHEME: {"type": "http", "scheme": "bearer", "description": AUTH_HELP}}
        schema["security"] = [{SECURITY_SCHEME: []}]
        for operation in schema["paths"].get("/health", {}).values():
            operation["security"] = []
        app.openapi_schema = schema
    return app.openapi_schema
