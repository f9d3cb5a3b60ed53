"""Queries on API keys and audit events (keyword-only; no commits here)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gateway.db import utcnow
from gateway.domain.auth.models import ApiKey, AuditEvent, DashboardSession, Membership, Project, User


def add_key(session: Session, *, name: str, prefix: str, key_hash: str, user_id: int, read_only: bool = False,
            expires_at: datetime | None = None) -> ApiKey:
    key = ApiKey(name=name, prefix=prefix, key_hash=key_hash, user_id=user_id, read_only=read_only,
                 expires_at=expires_at)
    session.add(key)
    session.flush()
    return key


def key_by_prefix(session: Session, *, prefix: str) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None)))


def key_by_name(session: Session, *, name: str) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(ApiKey.name == name))


def list_keys(session: Session, *, user_id: int | None = None) -> list[ApiKey]:
    stmt = select(ApiKey).order_by(ApiKey.id)
    if user_id is not None:
        stmt = stmt.where(ApiKey.user_id == user_id)
    return list(session.scalars(stmt))


def add_user(session: Session, *, name: str, role: str) -> User:
    user = User(name=name, role=role)
    session.add(user)
    session.flush()
    return user


def user_by_name(session: Session, *, name: str) -> User | None:
    return session.scalar(select(User).where(User.name == name))


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.id)))


def add_project(session: Session, *, name: str) -> Project:
    project = Project(name=name)
    session.add(project)
    session.flush()
    return project


def project_by_name(session: Session, *, name: str) -> Project | None:
    return session.scalar(select(Project).where(Project.name == name))


def list_projects(session: Session, *, ids: frozenset[int] | None = None) -> list[Project]:
    """Every project, or those in `ids`."""
    stmt = select(Project).order_by(Project.id)
    if ids is not None:
        stmt = stmt.where(Project.id.in_(ids))
    return list(session.scalars(stmt))


def add_membership(session: Session, *, user_id: int, project_id: int) -> Membership:
    member = session.get(Membership, (user_id, project_id))
    if member is None:
        member = Membership(user_id=user_id, project_id=project_id)
        session.add(member)
        session.flush()
    return member


def remove_membership(session: Session, *, user_id: int, project_id: int) -> bool:
    return session.execute(delete(Membership).where(Membership.user_id == user_id,
                                                    Membership.project_id == project_id)).rowcount > 0


def project_ids_of(session: Session, *, user_id: int) -> list[int]:
    return list(session.scalars(select(Membership.project_id).where(Membership.user_id == user_id)))


def members_of(session: Session, *, project_id: int) -> list[User]:
    stmt = select(User).join(Membership, Membership.user_id == User.id).where(Membership.project_id == project_id)
    return list(session.scalars(stmt.order_by(User.id)))


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
