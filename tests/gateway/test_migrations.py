"""Alembic migrations upgrade and downgrade on both back-ends, and match the ORM models."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from gateway.migrate import current, downgrade, upgrade
from gateway.models import Base
from tests.conftest import create_pg_database, drop_pg_database

EXPECTED_TABLES = {
    "api_keys", "artifacts", "audit_events", "concepts", "datasets", "documents", "embedding_runs",
    "families", "family_members", "features", "interpretations", "jobs", "sae_runs",
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
