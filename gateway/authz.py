"""Who may do what: one policy for every route of the API and the dashboard, decided from the route's
path template and method before the route's own parameters are read.

- Admin routes (users, projects, keys, the audit log) need an administrator.
- Any other method than GET/HEAD (except the few POSTs that only read) needs an editor or an
  admin with a key that is not read-only: a viewer's POST is a 403 before its body is validated.
- A route about one object (`/datasets/{dataset_id}`, `/sae-runs/{run_id}/...`, `/concepts/{concept_id}`,
  `/jobs/{job_id}`, ...) is answered 404 when the object does not exist *or* belongs to a project the
  caller is not a member of: the two answers are the same, so ids do not leak.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from gateway.deps import SessionDep, require_api_key
from gateway.domain.auth.scope import NOT_FOUND_NAMES, Kind, visible
from gateway.domain.auth.service import Principal

# Templates as the route's own router declares them: FastAPI puts the route itself in the scope, whose
# path lacks the prefix of the router that includes it (`/api/v1`); the API and the dashboard agree on these.
ADMIN_PREFIXES = ("/api-keys", "/users", "/projects", "/audit-events", "/audit", "/admin")
READS_BY_POST = frozenset({"/sae-runs/{run_id}/search", "/logout", "/project", "/concepts/{concept_id}/classify",
                           "/sae-runs/{run_id}/encode", "/sae-runs/{run_id}/paste", "/concepts/{concept_id}/try"})
LABELLING = frozenset({"/concepts/{concept_id}/labels/{document_id}", "/concepts/{concept_id}/labels",
                       "/concepts/{concept_id}/labels/{document_id}/undo", "/concepts/{concept_id}/labels/import",
                       "/concepts/{concept_id}/queue", "/concepts/{concept_id}/retrain",
                       "/concepts/{concept_id}/label/answer", "/concepts/{concept_id}/label/undo"})
"""Routes that write a concept's labels (or hand out and retrain on them): a labeller may, besides editors."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SCOPED_SEGMENTS: dict[str, Kind] = {"datasets": "dataset", "embedding-runs": "embedding_run", "sae-runs": "sae_run",
                                    "concepts": "concept", "jobs": "job"}
INT32_MAX = 2**31 - 1


def route_template(request: Request) -> str:
    route = request.scope.get("route")
    return getattr(route, "path_format", None) or request.url.path


def scoped_object(template: str) -> tuple[Kind, str] | None:
    """The object a route is about: the first `{param}` after a scoped collection's name."""
    parts = template.strip("/").split("/")
    for previous, part in zip(parts, parts[1:]):
        if part.startswith("{") and previous in SCOPED_SEGMENTS:
            return SCOPED_SEGMENTS[previous], part.strip("{}").split(":")[0]
    return None


def _object_id(kind: Kind, raw: str) -> int | str | None:
    """The id as the route will read it, or None where the route itself will answer 422."""
    if kind == "job":
        return raw if len(raw) <= 80 else None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if abs(value) <= INT32_MAX else None


def check_access(request: Request, session: Session, principal: Principal) -> None:
    template = route_template(request)
    if template.startswith(ADMIN_PREFIXES) and not principal.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="only an administrator may do this")
    writes = request.method not in SAFE_METHODS and template not in READS_BY_POST
    if writes and template in LABELLING:
        if not principal.can_label:
            why = "this key is read-only" if principal.read_only else f"a {principal.role} may only read"
            raise HTTPException(status.HTTP_403_FORBIDDEN, detail=f"{why}: labelling needs a labeller or an editor")
    elif writes and not principal.can_write:
        why = "this key is read-only" if principal.read_only else f"a {principal.role} may only read"
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail=f"{why}: creating, running and changing need an editor")
    target = scoped_object(template)
    if target is None:
        return
    kind, param = target
    raw = request.path_params.get(param)
    object_id = _object_id(kind, str(raw)) if raw is not None else None
    # No autoflush: the key's pending `last_used_at` would take SQLite's write lock for the whole request.
    with session.no_autoflush:
        seen = object_id is None or visible(session, principal, kind, object_id)
    if not seen:
        shown = repr(object_id) if kind == "job" else object_id
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"{NOT_FOUND_NAMES[kind]} {shown} not found")


def authorize_api(request: Request, session: SessionDep,
                  principal: Annotated[Principal, Depends(require_api_key)]) -> None:
    check_access(request, session, principal)
