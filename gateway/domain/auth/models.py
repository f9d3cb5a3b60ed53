"""Users, projects and their memberships; API keys (hashed at rest, each a user's); the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, false
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db import Base, utcnow


ROLES = ("admin", "editor", "labeller", "viewer")
"""A viewer reads; a labeller also labels notes of concepts (and asks the queue, retrains); an editor also creates
and runs; an admin also manages users, projects, keys and the audit log."""


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(10), comment="admin | editor | labeller | viewer")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Project(Base):
    """Datasets belong to a project, and so does everything derived from them."""

    __tablename__ = "projects"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Membership(Base):
    """A user may see (viewer) or also change (editor) the datasets of the projects they belong to."""

    __tablename__ = "memberships"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True,
                                            index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    read_only: Mapped[bool] = mapped_column(default=False, server_default=false(),
                                            comment="Reads only, whatever the user's role.")
    expires_at: Mapped[datetime | None] = mapped_column(comment="Refused from then on (401); none: never.")
    prefix: Mapped[str] = mapped_column(String(16), unique=True, comment="Public part of the key, for lookup.")
    key_hash: Mapped[str] = mapped_column(String(64), comment="SHA-256 of the whole key, hex.")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class AuditEvent(Base):
    """Who did what, when. Never document text: only ids, counts and names."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"))
    actor: Mapped[str] = mapped_column(String(100), index=True)
    action: Mapped[str] = mapped_column(String(100), index=True)
    target_type: Mapped[str | None] = mapped_column(String(50))
    target_id: Mapped[str | None] = mapped_column(String(100))
    request_id: Mapped[str | None] = mapped_column(String(64))
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    project_id: Mapped[int | None] = mapped_column(index=True, comment="The project of the target, when it has one.")


class DashboardSession(Base):
    """A dashboard login known to the server: the signed cookie carries a random token, this row its
    SHA-256. Logging out deletes the row, so a copy of the cookie stops working with it."""

    __tablename__ = "dashboard_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True,
                                            comment="SHA-256 of the session token in the cookie, hex.")
    api_key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
