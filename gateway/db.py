"""Database engine, sessions and the declarative base with a naming convention."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, MetaData, create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

# Alembic names constraints from this, so migrations are stable across back-ends.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, list[str]: JSON}


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


@lru_cache(maxsize=8)
def get_engine(url: str) -> Engine:
    """One engine per URL for the process (pool_pre_ping recovers after a database restart)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # 48 connections at most: two for each of the gateway's 24 concurrent requests (the default
    # PRISMA_MAX_CONCURRENT_REQUESTS), within PostgreSQL's default of 100 for a gateway and its worker.
    return create_engine(url, pool_pre_ping=True, pool_size=16, max_overflow=32)


def session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


@contextmanager
def unit_of_work(session: Session) -> Iterator[Session]:
    """Commit `session` when the block ends without error, roll it back on any error."""
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A unit of work on a session of its own, closed afterwards."""
    session = factory()
    try:
        with unit_of_work(session):
            yield session
    finally:
        session.close()


def refresh_statistics(session: Session | Any, *tables: str) -> None:
    """ANALYZE `tables` on PostgreSQL after a bulk load: until autovacuum gets to them the planner
    has no statistics and may join 12,288 features to their names by nested seq scans (seconds
    to minutes per page). SQLite plans from its indexes; nothing to do there."""
    if session.bind.dialect.name == "postgresql":
        for table in tables:
            session.execute(text(f'ANALYZE "{table}"'))

