"""Shared pieces of the dashboard: templates, CSRF tokens, the login page."""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path
from typing import Any

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.responses import Response

from gateway.authz import check_access
from gateway.deps import SessionDep, require_login
from gateway.domain.auth import repo as auth_repo
from gateway.domain.auth.accounts import DEFAULT_PROJECT
from gateway.domain.auth.service import Principal

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "web" / "templates"
templates = Jinja2Templates(directory=TEMPLATES_DIR)  # autoescape is on for .html
CSRF_HEADER = "x-csrf-token"


def csrf_token(request: Request) -> str:
    """The session's CSRF token, created on first use."""
    token = request.session.get("csrf")
    if not token:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def check_csrf(request: Request, form_token: str | None = None) -> None:
    """Forms and HTMX requests must echo the session's token (header or form field). Compared as
    UTF-8 bytes: compare_digest refuses str with non-ASCII characters (a TypeError, once a 500)."""
    expected = request.session.get("csrf")
    presented = request.headers.get(CSRF_HEADER) or form_token or ""
    presented_bytes = presented.encode("utf-8", "surrogatepass")
    if not expected or not hmac.compare_digest(str(expected).encode(), presented_bytes):
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="CSRF token missing or wrong; reload the page")


def choose_project(request: Request, session: Session, principal: Principal) -> None:
    """The dashboard's current project (the one chosen in this session, else `default`, else the first
    the user sees) and the others it may switch to, kept on `request.state` for pages and templates."""
    with session.no_autoflush:  # the key's pending last use must not take SQLite's write lock now
        projects = auth_repo.list_projects(session, ids=principal.project_ids)
    chosen = request.session.get("project")
    current = (next((p for p in projects if p.id == chosen), None)
               or next((p for p in projects if p.name == DEFAULT_PROJECT), None) or (projects[0] if projects else None))
    request.state.project, request.state.projects = current, projects


def dashboard_access(request: Request, session: SessionDep,
                     principal: Annotated[Principal, Depends(require_login)]) -> None:
    """Every private page: the API's policy (`gateway.authz`), then the current project."""
    check_access(request, session, principal)
    choose_project(request, session, principal)


def shown_projects(request: Request) -> frozenset[int]:
    """What a dashboard list shows: the current project's (nothing for a user who has none)."""
    project = getattr(request.state, "project", None)
    return frozenset({project.id}) if project is not None else frozenset()


def render(request: Request, template: str, context: dict[str, Any] | None = None, *, status_code: int = 200,
           headers: dict[str, str] | None = None) -> Response:
    principal = getattr(request.state, "principal", None)
    ctx = {"csrf_token": csrf_token(request), "principal": principal,
           "can_write": bool(principal and principal.can_write), "project": getattr(request.state, "project", None),
           "projects": getattr(request.state, "projects", [])}
    ctx.update(context or {})
    return templates.TemplateResponse(request, template, ctx, status_code=status_code, headers=headers)


def login_page_response(request: Request, *, status_code: int = 200, error: str | None = None) -> Response:
    if request.headers.get("hx-request"):
        # An HTMX fragment request after the session expired: send the whole page to the login.
        return Response(status_code=status_code, headers={"HX-Redirect": "/login"})
    next_url = request.url.path if request.url.path not in ("/login", "/logout") else "/datasets"
    return render(request, "pages/login.html", {"error": error, "next": next_url}, status_code=status_code)


class Pager(BaseModel):
    """Offsets for a paged table."""

    offset: int
    limit: int
    total: int

    @property
    def prev_offset(self) -> int | None:
        return max(self.offset - self.limit, 0) if self.offset > 0 else None

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def first(self) -> int:
        return min(self.offset + 1, self.total)

    @property
    def last(self) -> int:
        return min(self.offset + self.limit, self.total)
