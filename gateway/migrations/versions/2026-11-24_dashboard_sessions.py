"""dashboard sessions: a row per login (the hash of the cookie's token), deleted at logout

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("token_hash", sa.String(length=64), nullable=False,
                  comment="SHA-256 of the session token in the cookie, hex."),
        sa.Column("api_key_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["api_key_id"], ["api_keys.id"],
                                name=op.f("fk_dashboard_sessions_api_key_id_api_keys"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_dashboard_sessions")),
    )
    with op.batch_alter_table("dashboard_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dashboard_sessions_api_key_id"), ["api_key_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dashboard_sessions_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dashboard_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dashboard_sessions_expires_at"))
        batch_op.drop_index(batch_op.f("ix_dashboard_sessions_api_key_id"))
    op.drop_table("dashboard_sessions")
