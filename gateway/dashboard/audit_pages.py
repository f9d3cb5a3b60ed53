"""The audit log page: who read or changed what, filtered by actor, action and time, paged."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from contracts.catalog import AuditEventOut, AuditFilter
from gateway.dashboard.views import Pager, render
from gateway.deps import SessionDep, require_login
from gateway.domain.auth import trail

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
EVENTS_PER_PAGE = 50


def parse_filters(fields: dict[str, str]) -> tuple[AuditFilter, str | None]:
    """The form's filters (empty fields ignored); an invalid one gives no filter and a message naming it."""
    given = {k: v.strip() for k, v in fields.items() if v.strip()}
    try:
        return AuditFilter.model_validate(given), None
    except ValidationError as exc:
        err = exc.errors()[0]
        return AuditFilter(), f"{err['loc'][0]}: {err['msg']} (e.g. 2026-11-24T09:30)"


@router.get("/audit", response_class=HTMLResponse)
def audit_page(
    request: Request, session: SessionDep,
    actor: Annotated[str, Query(max_length=100)] = "", action: Annotated[str, Query(max_length=100)] = "",
    since: Annotated[str, Query(max_length=40)] = "", until: Annotated[str, Query(max_length=40)] = "",
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    fields = {"actor": actor, "action": action, "since": since, "until": until}
    filters, error = parse_filters(fields)
    rows, total = ([], 0) if error else trail.list_events(session, **filters.model_dump(), limit=EVENTS_PER_PAGE,
                                                          offset=offset)
    ctx = {"events": [AuditEventOut.model_validate(e) for e in rows], "fields": fields, "error": error,
           "pager": Pager(offset=offset, limit=EVENTS_PER_PAGE, total=total),
           "filters": urlencode({k: v for k, v in fields.items() if v})}
    return render(request, "pages/audit.html", ctx, status_code=422 if error else 200)
