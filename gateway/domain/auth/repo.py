"""Queries on API keys and audit events (keyword-only; no commits here)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gateway.db import utcnow
from gateway.domain.auth.models import ApiKey, AuditEvent, DashboardSession


def add_key(session: Session, *, name: str, prefix: str, key_hash: str) -> ApiKey:
    key = ApiKey(name=name, prefix=prefix, key_hash=key_hash)
    session.add(key)
    session.flush()
    return key


def key_by_prefix(session: Session, *, prefix: str) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None)))


def key_by_name(session: Session, *, name: str) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(ApiKey.name == name))


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.id)))


def revoke_key(session: Session, *, key: ApiKey) -> None:
    key.revoked_at = utcnow()


def add_dashboard_session(session: Session, *, token_hash: str, api_key_id: int, expires_at: datetime) -> None:
    session.add(DashboardSession(token_hash=token_hash, api_key_id=api_key_id, expires_at=expires_at))


def get_dashboard_session(session: Session, *, token_hash: str) -> DashboardSession | None:
    return session.get(DashboardSession, token_hash)


def delete_dashboard_session(session: Session, *, token_hash: str) -> None:
    session.execute(delete(DashboardSession).where(DashboardSession.token_hash == token_hash))


def delete_expired_dashboard_sessions(session: Session, *, now: datetime) -> None:
    session.execute(delete(DashboardSession).where(DashboardSession.expires_at <= now))


def add_audit_event(
    session: Session,
    *,
    actor: str,
    action: str,
    api_key_id: int | None = None,
    target_type: str | None = None,
    target_id: str | int | None = None,
    request_id: str | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    event = AuditEvent(
        actor=actor,
        action=action,
        api_key_id=api_key_id,
        target_type=target_type,
        target_id=None if target_id is None else str(target_id),
        request_id=request_id,
        details=details or {},
    )
    session.add(event)
    return event


def list_audit_events(session: Session, *, limit: int = 100, offset: int = 0) -> list[AuditEvent]:
    stmt = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit).offset(offset)
    return list(session.scalars(stmt))
