"""/api/v1/api-keys and /api/v1/audit-events (administrators only: `gateway.authz`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from contracts.catalog import ApiKeyCreate, ApiKeyCreated, ApiKeyOut, AuditEventOut, AuditFilter, ErrorOut
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.auth import repo, trail
from gateway.domain.auth.accounts import user_named
from gateway.domain.auth.models import ApiKey, User
from gateway.domain.auth.service import KeyNameTaken, audit, create_key

router = APIRouter(tags=["auth"])


@router.get("/api-keys", response_model=list[ApiKeyOut])
def list_keys(session: SessionDep, _: CurrentKey) -> list[ApiKeyOut]:
    return [ApiKeyOut.model_validate(k) for k in repo.list_keys(session)]


@router.post("/api-keys", response_model=ApiKeyCreated, status_code=status.HTTP_201_CREATED, responses={409: {"model": ErrorOut}})
def new_key(body: ApiKeyCreate, session: SessionDep, principal: CurrentKey, rid: RequestId) -> ApiKeyCreated:
    """Create a key for `user` (default: the caller's own user), read-only or not, expiring or not;
    the response holds the key itself, shown only this once."""
    owner = user_named(session, body.user) if body.user else None
    if owner is None and principal.user_id is not None:
        owner = session.get(User, principal.user_id)
    try:
        key, plain = create_key(session, name=body.name, user=owner, read_only=body.read_only,
                                expires_at=body.expires_at)
    except KeyNameTaken as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(exc)) from None
    audit(session, principal, "apikey.create", target_type="api_key", target_id=key.id, request_id=rid)
    return ApiKeyCreated(**ApiKeyOut.model_validate(key).model_dump(), key=plain)


@router.delete("/api-keys/{key_id}", response_model=ApiKeyOut, responses={404: {"model": ErrorOut}})
def revoke(key_id: int, session: SessionDep, principal: CurrentKey, rid: RequestId) -> ApiKeyOut:
    key = session.get(ApiKey, key_id)
    if key is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"API key {key_id} not found")
    repo.revoke_key(session, key=key)
    audit(session, principal, "apikey.revoke", target_type="api_key", target_id=key_id, request_id=rid)
    return ApiKeyOut.model_validate(key)


@router.get("/audit-events", response_model=list[AuditEventOut])
def audit_events(
    session: SessionDep, _: CurrentKey, filters: Annotated[AuditFilter, Query()],
    limit: Annotated[int, Query(ge=1, le=500)] = 100, offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> list[AuditEventOut]:
    """Newest first; `actor` (a key's name, 'cli' or 'anonymous'), `action` ('documents.read', or a
    prefix ending in '.': 'auth.'), `since` (inclusive) and `until` (exclusive), ISO 8601 times."""
    rows, _total = trail.list_events(session, **filters.model_dump(), limit=limit, offset=offset)
    return [AuditEventOut.model_validate(e) for e in rows]
