"""API keys: `prisma_<prefix>_<secret>`, shown once, stored as a SHA-256 hash.

The secret has 256 bits of entropy, so a fast hash is enough (as GitHub and Stripe tokens):
there is nothing to brute-force. Lookup is by the public prefix, comparison in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from gateway.db import utcnow
from gateway.domain.auth import repo
from gateway.domain.auth.accounts import AccountError, admin_user
from gateway.domain.auth.models import ApiKey, User
from gateway.domain.auth.principal import Principal

KEY_SCHEME = "prisma"
LAST_USED_GRANULARITY = timedelta(minutes=1)
"""`last_used_at` is written at most once a minute per key (as GitHub's "last used" is coarse): a
write on every request would make concurrent requests with one key queue on that row's lock."""


def principal_of(session: Session, key: ApiKey) -> Principal:
    """The caller a key stands for: its user's role and projects (every project for an admin)."""
    user = session.get(User, key.user_id)
    role = user.role if user is not None else "viewer"
    projects = None if role == "admin" else frozenset(repo.project_ids_of(session, user_id=key.user_id))
    return Principal(key_id=key.id, name=key.name, role=role, read_only=key.read_only, project_ids=projects,
                     user_id=key.user_id)


def key_is_live(key: ApiKey | None, now: datetime) -> bool:
    return key is not None and key.revoked_at is None and (key.expires_at is None or key.expires_at > now)


class KeyNameTaken(ValueError):
    pass


def audit(
    session: Session, principal: Principal | None, action: str, *, target_type: str | None = None,
    target_id: str | int | None = None, request_id: str | None = None, details: dict[str, Any] | None = None,
) -> None:
    """Record who did `action` (a key, or the command line when `principal` is None). Never document text."""
    repo.add_audit_event(
        session, actor=principal.name if principal else "cli", api_key_id=principal.key_id if principal else None,
        action=action, target_type=target_type, target_id=target_id, request_id=request_id, details=details,
    )


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(
    session: Session, *, name: str, user: User | None = None, read_only: bool = False,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key for `user` (default: the built-in administrator, `admin`); returns the row and
    the plain key, which is never stored."""
    name = name.strip()
    if not name:
        raise ValueError("name: must not be empty")
    if repo.key_by_name(session, name=name) is not None:
        raise KeyNameTaken(f"name: an API key named {name!r} already exists")
    if expires_at is not None and expires_at.tzinfo is not None:
        expires_at = expires_at.astimezone(UTC).replace(tzinfo=None)  # stored naive, in UTC, as every time here
    if expires_at is not None and expires_at <= utcnow():
        raise AccountError("expires_at: must be in the future", field="expires_at")
    owner = user if user is not None else admin_user(session)
    prefix = secrets.token_hex(6)
    plain = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    key = repo.add_key(session, name=name, prefix=prefix, key_hash=hash_key(plain), user_id=owner.id,
                       read_only=read_only, expires_at=expires_at)
    return key, plain  # the caller audits it as the creating key (or the CLI): never as the new key


def start_session(session: Session, principal: Principal, *, max_age_s: int) -> str:
    """A dashboard session for `principal`: returns the token the (signed) cookie carries; the
    database keeps its hash until logout or `max_age_s` from now, whichever comes first."""
    now = utcnow()
    repo.delete_expired_dashboard_sessions(session, now=now)
    token = secrets.token_urlsafe(32)
    repo.add_dashboard_session(session, token_hash=hash_key(token), api_key_id=principal.key_id,
                               expires_at=now + timedelta(seconds=max_age_s))
    return token  # committed by the request's unit of work before the redirect is sent (gateway.deps.get_session)


def session_principal(session: Session, token: str) -> Principal | None:
    """The principal of a live dashboard session, or None (logged out, expired, or its key revoked)."""
    row = repo.get_dashboard_session(session, token_hash=hash_key(token))
    now = utcnow()
    if row is None or row.expires_at <= now:
        return None
    key = session.get(ApiKey, row.api_key_id)
    if not key_is_live(key, now):
        return None
    return principal_of(session, key)


def end_session(session: Session, token: str) -> None:
    """Logout: the session's row goes, so the cookie (and any copy of it) no longer authenticates."""
    repo.delete_dashboard_session(session, token_hash=hash_key(token))


def verify_key(session: Session, plain: str) -> Principal | None:
    """The principal for a presented key, or None (unknown, malformed, revoked or expired)."""
    parts = plain.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_SCHEME:
        return None
    key = repo.key_by_prefix(session, prefix=parts[1])
    if key is None or not hmac.compare_digest(key.key_hash, hash_key(plain)):
        return None
    now = utcnow()
    if not key_is_live(key, now):
        return None
    principal = principal_of(session, key)
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_GRANULARITY:
        key.last_used_at = now  # flushed with the request's unit of work, not by the reads before it
    return principal
