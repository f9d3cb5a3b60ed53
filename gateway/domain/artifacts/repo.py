"""The artifact catalogue."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from contracts.artifacts import ArtifactInfo
from gateway.domain.artifacts.models import Artifact


def record(session: Session, *, info: ArtifactInfo, owner_type: str | None = None, owner_id: int | None = None) -> Artifact:
    """Catalogue an artifact (idempotent on URI: a rewritten file updates its row)."""
    row = session.scalar(select(Artifact).where(Artifact.uri == info.uri))
    if row is None:
        row = Artifact(uri=info.uri)
        session.add(row)
    row.kind, row.size, row.sha256 = info.kind, info.size, info.sha256
    row.owner_type, row.owner_id = owner_type, owner_id
    session.flush()
    return row


def get(session: Session, *, artifact_id: int) -> Artifact | None:
    return session.get(Artifact, artifact_id)


def for_owner(session: Session, *, owner_type: str, owner_id: int) -> list[Artifact]:
    stmt = select(Artifact).where(Artifact.owner_type == owner_type, Artifact.owner_id == owner_id)
    return list(session.scalars(stmt.order_by(Artifact.id)))


def forget_owner(session: Session, *, owner_type: str, owner_id: int) -> None:
    session.execute(delete(Artifact).where(Artifact.owner_type == owner_type, Artifact.owner_id == owner_id))
