"""embedding runs record how their sequences were padded: runs made before say pad_multiple 1

A new run pads each sequence to a width that is at least a multiple of 4 (contracts.embed.PAD_MULTIPLE); runs made
before padded short sequences to their own length. Under bf16 a sequence's vector depends on its padded width by
about 1e-3, so a text sent later (classify, encode, an extension to appended notes) must be padded as its run padded
its notes: every existing embedding run gets `pad_multiple: 1` in its spec. Downgrade removes the key.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

runs = sa.table("embedding_runs", sa.column("id", sa.Integer), sa.column("spec", sa.JSON))


def upgrade() -> None:
    conn = op.get_bind()
    for run_id, spec in conn.execute(sa.select(runs.c.id, runs.c.spec)).all():
        spec = dict(spec or {})
        if "pad_multiple" not in spec:
            conn.execute(runs.update().where(runs.c.id == run_id).values(spec={**spec, "pad_multiple": 1}))


def downgrade() -> None:
    """The key goes (the older spec model forbids unknown keys); a run made with 4 then reads as padded with 1."""
    conn = op.get_bind()
    for run_id, spec in conn.execute(sa.select(runs.c.id, runs.c.spec)).all():
        if spec and "pad_multiple" in spec:
            conn.execute(runs.update().where(runs.c.id == run_id).values(
                spec={k: v for k, v in spec.items() if k != "pad_multiple"}))
