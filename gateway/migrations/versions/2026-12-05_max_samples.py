"""SAE runs record the bound on their training samples: runs made before say max_samples null

A new SAE run without max_steps stops after at most contracts.sae.MAX_SAMPLES samples; runs made before trained
for their epochs alone. A run's config is read again when its job is retried (a killed worker resumes from its
checkpoint), so every existing run gets `max_samples: null` and keeps its own schedule. Downgrade removes the key.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

runs = sa.table("sae_runs", sa.column("id", sa.Integer), sa.column("config", sa.JSON))


def upgrade() -> None:
    conn = op.get_bind()
    for run_id, config in conn.execute(sa.select(runs.c.id, runs.c.config)).all():
        sae = dict((config or {}).get("sae") or {})
        if sae and "max_samples" not in sae:
            conn.execute(runs.update().where(runs.c.id == run_id).values(
                config={**config, "sae": {**sae, "max_samples": None}}))


def downgrade() -> None:
    """The key goes (the older config model forbids unknown keys)."""
    conn = op.get_bind()
    for run_id, config in conn.execute(sa.select(runs.c.id, runs.c.config)).all():
        sae = (config or {}).get("sae") or {}
        if "max_samples" in sae:
            conn.execute(runs.update().where(runs.c.id == run_id).values(
                config={**config, "sae": {k: v for k, v in sae.items() if k != "max_samples"}}))
