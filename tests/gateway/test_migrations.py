"""Alembic migrations upgrade and downgrade on both back-ends, and match the ORM models."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from gateway.migrate import current, downgrade, upgrade
from gateway.models import Base
from tests.conftest import create_pg_database, drop_pg_database

EXPECTED_TABLES = {
    "api_keys", "artifacts", "audit_events", "concepts", "datasets", "documents", "embedding_runs",
    "families", "family_members", "features", "interpretations", "jobs", "memberships", "projects", "sae_runs",
    "users",
}
# Full-text search objects of migration 0002 that an ORM model cannot declare: PostgreSQL's GIN
# expression index, SQLite's FTS5 table and its shadow tables.
UNMODELLED = {"ix_interpretations_label_search", "interpretations_fts", "interpretations_fts_data",
              "interpretations_fts_idx", "interpretations_fts_content", "interpretations_fts_docsize",
              "interpretations_fts_config"}


def _modelled(name, type_, parent_names) -> bool:  # noqa: ANN001
    return name not in UNMODELLED


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db(request: pytest.FixtureRequest, tmp_path: Path):  # noqa: ANN201
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
    else:
        url = create_pg_database()
        yield url
        drop_pg_database(url)


def test_upgrade_downgrade_upgrade(empty_db: str) -> None:
    upgrade(empty_db)
    assert current(empty_db) is not None
    engine = create_engine(empty_db)
    assert EXPECTED_TABLES <= set(inspect(engine).get_table_names())
    downgrade(empty_db, "base")
    assert current(empty_db) is None
    assert not EXPECTED_TABLES & set(inspect(engine).get_table_names())
    upgrade(empty_db)
    assert EXPECTED_TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_migrations_match_models(empty_db: str) -> None:
    """A model changed without a migration shows up here."""
    upgrade(empty_db)
    engine = create_engine(empty_db)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"include_name": _modelled}), Base.metadata)
    engine.dispose()
    assert diff == []


def test_constraint_names_follow_the_convention(empty_db: str) -> None:
    upgrade(empty_db)
    engine = create_engine(empty_db)
    insp = inspect(engine)
    fks = [fk["name"] for fk in insp.get_foreign_keys("documents")]
    uqs = [uq["name"] for uq in insp.get_unique_constraints("api_keys")]
    engine.dispose()
    assert "fk_documents_dataset_id_datasets" in fks
    assert "uq_api_keys_name" in uqs


def test_a_single_user_install_becomes_one_admin_and_one_default_project(empty_db: str) -> None:
    """Migration 0005 on an install from before users: every key is the admin's, every dataset and job
    the default project's, the admin its member; and the keys still work."""
    from gateway.db import session_factory
    from gateway.domain.auth.service import hash_key, verify_key

    upgrade(empty_db, "0004")
    engine = create_engine(empty_db)
    plain = "prisma_0123456789ab_secret"
    with engine.begin() as conn:
        for i, name in enumerate(("laptop", "ci"), start=1):
            conn.execute(text("INSERT INTO api_keys (id, name, prefix, key_hash, created_at) VALUES "
                              "(:i, :n, :p, :h, CURRENT_TIMESTAMP)"),
                         {"i": i, "n": name, "p": "0123456789ab" if i == 1 else "ffffffffffff", "h": hash_key(plain)})
        conn.execute(text("INSERT INTO datasets (id, name, format, n_documents, size_bytes, text_bytes, column_mapping, "
                          "label_counts, created_by_key_id, created_at) VALUES "
                          "(1, 'notes', 'csv', 0, 0, 0, '{}', '{}', 2, CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO jobs (id, kind, queue, status, payload, progress_done, progress_unit, attempts, "
                          "cancel_requested, created_at, updated_at) VALUES ('embedding_run-x', 'embedding_run', "
                          "'gateway', 'succeeded', '{}', 0, 'items', 1, false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
    upgrade(empty_db)
    with engine.connect() as conn:
        users = conn.execute(text("SELECT id, name, role FROM users")).all()
        projects = conn.execute(text("SELECT id, name FROM projects")).all()
        assert [(u.name, u.role) for u in users] == [("admin", "admin")]
        assert [p.name for p in projects] == ["default"]
        admin_id, default_id = users[0].id, projects[0].id
        assert set(conn.scalars(text("SELECT user_id FROM api_keys"))) == {admin_id}
        assert conn.execute(text("SELECT read_only, expires_at FROM api_keys WHERE id = 1")).one() == (False, None)
        assert conn.scalar(text("SELECT project_id FROM datasets WHERE id = 1")) == default_id
        assert conn.scalar(text("SELECT project_id FROM jobs")) == default_id
        assert conn.execute(text("SELECT user_id, project_id FROM memberships")).all() == [(admin_id, default_id)]
    engine.dispose()
    factory = session_factory(empty_db)
    with factory() as session:
        principal = verify_key(session, plain)
    assert principal is not None and principal.is_admin and principal.can_write and principal.name == "laptop"
    downgrade(empty_db, "0004")  # and back: the columns and tables go, the rows stay
    engine = create_engine(empty_db)
    assert "users" not in inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM api_keys")) == 2
    engine.dispose()
