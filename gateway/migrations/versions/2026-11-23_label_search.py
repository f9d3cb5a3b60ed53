"""label search: full-text index of interpretation labels and descriptions

PostgreSQL: a GIN index on the expression to_tsvector('simple', label || ' ' || description),
which the database keeps current by itself. SQLite (embedded mode): an FTS5 table over
`interpretations` (external content, so the text is stored once), kept current by triggers.
The 'simple' configuration and FTS5's unicode61 tokenizer stem nothing: labels are Italian and
English, and a stemmer for one language would mangle the other.

SQLite caveat for later migrations: a batch_alter_table on `interpretations` copies the table and
drops these triggers; such a migration must re-create them (see `create_sqlite_index` below).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 08:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PG_INDEX = "ix_interpretations_label_search"
PG_DOCUMENT = "to_tsvector('simple', label || ' ' || coalesce(description, ''))"
FTS_TABLE = "interpretations_fts"
# FTS5 creates these shadow tables beside the virtual one; schema comparisons must skip them all
SQLITE_OBJECTS = (FTS_TABLE, *(f"{FTS_TABLE}_{s}" for s in ("data", "idx", "content", "docsize", "config")))

_FTS_DELETE = (f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, label, description) "
               "VALUES ('delete', old.id, old.label, old.description);")
_FTS_INSERT = f"INSERT INTO {FTS_TABLE}(rowid, label, description) VALUES (new.id, new.label, new.description);"


def create_sqlite_index() -> None:
    op.execute(f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(label, description, content='interpretations', "
               "content_rowid='id', tokenize='unicode61 remove_diacritics 2')")
    op.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
    op.execute(f"CREATE TRIGGER {FTS_TABLE}_ai AFTER INSERT ON interpretations BEGIN {_FTS_INSERT} END")
    op.execute(f"CREATE TRIGGER {FTS_TABLE}_ad AFTER DELETE ON interpretations BEGIN {_FTS_DELETE} END")
    op.execute(f"CREATE TRIGGER {FTS_TABLE}_au AFTER UPDATE ON interpretations BEGIN {_FTS_DELETE} {_FTS_INSERT} END")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE INDEX {PG_INDEX} ON interpretations USING gin ({PG_DOCUMENT})")
    else:
        create_sqlite_index()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")
    else:
        for trigger in ("ai", "ad", "au"):
            op.execute(f"DROP TRIGGER IF EXISTS {FTS_TABLE}_{trigger}")
        op.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")
