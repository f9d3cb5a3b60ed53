"""names: a calibrated activation threshold per interpretation, and why a feature was not named

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("interpretations", schema=None) as batch_op:
        batch_op.add_column(sa.Column(
            "threshold", sa.Double(), nullable=True,
            comment='Lowest activation above which the name holds with precision >= 0.8; label:"..." means above it.'))
    with op.batch_alter_table("features", schema=None) as batch_op:
        batch_op.add_column(sa.Column(
            "skip_reason", sa.String(length=300), nullable=True,
            comment="Why the last naming job gave it no name (too rare, no separating phrase, ...)."))


def downgrade() -> None:
    with op.batch_alter_table("features", schema=None) as batch_op:
        batch_op.drop_column("skip_reason")
    with op.batch_alter_table("interpretations", schema=None) as batch_op:
        batch_op.drop_column("threshold")
