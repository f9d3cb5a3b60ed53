"""the default encoder becomes multilingual-e5-small: runs made with 'default' name all-MiniLM-L6-v2

Until now 'default' meant all-MiniLM-L6-v2. A run keeps the model it was made with, so every run
(and an imported run's query model) recorded as 'default' is renamed to the model it really used;
new runs record the default's own name. Downgrade leaves the names: they stay true.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_DEFAULT = "all-MiniLM-L6-v2"

runs = sa.table("embedding_runs", sa.column("id", sa.Integer), sa.column("model", sa.String),
                sa.column("spec", sa.JSON))


def upgrade() -> None:
    conn = op.get_bind()
    for run_id, model, spec in conn.execute(sa.select(runs.c.id, runs.c.model, runs.c.spec)).all():
        spec = dict(spec or {})
        changed = {key: OLD_DEFAULT for key in ("model", "query_model") if spec.get(key) == "default"}
        if model == "default" or changed:
            conn.execute(runs.update().where(runs.c.id == run_id).values(
                model=OLD_DEFAULT if model == "default" else model, spec={**spec, **changed}))


def downgrade() -> None:
    """Nothing to undo: the renamed runs name the model that made them either way."""
