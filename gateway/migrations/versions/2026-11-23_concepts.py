"""concepts: description, labelled examples, features read, the apply job and its matches;
one name per SAE run

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("concepts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("description", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column(
            "examples", sa.JSON(), nullable=True,
            comment="Labelled documents (by label or id) and the held-out split: the probe's training data."))
        batch_op.add_column(sa.Column(
            "features", sa.JSON(), nullable=True,
            comment="Feature indices the concept reads (an expression's references, a probe's non-zero weights)."))
        batch_op.add_column(sa.Column("apply_job_id", sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column(
            "applied", sa.JSON(), nullable=True,
            comment="The last finished apply: matches artifact URI, counts, definition version."))
        batch_op.create_foreign_key(batch_op.f("fk_concepts_apply_job_id_jobs"), "jobs", ["apply_job_id"], ["id"],
                                    ondelete="SET NULL")
        batch_op.create_unique_constraint(batch_op.f("uq_concepts_sae_run_id"), ["sae_run_id", "name"])


def downgrade() -> None:
    with op.batch_alter_table("concepts", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_concepts_sae_run_id"), type_="unique")
        batch_op.drop_constraint(batch_op.f("fk_concepts_apply_job_id_jobs"), type_="foreignkey")
        batch_op.drop_column("applied")
        batch_op.drop_column("apply_job_id")
        batch_op.drop_column("features")
        batch_op.drop_column("examples")
        batch_op.drop_column("description")
