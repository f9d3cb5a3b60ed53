"""users, projects, memberships; keys belong to a user (read-only, expiry); datasets and jobs to a project

An existing single-user install becomes one admin user, `admin`, owning every existing key, and one
project, `default`, owning every dataset and job (the admin is its member). A fresh database gets
the same two rows, so the first key created without a user is the administrator's.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ADMIN_USER = "admin"
DEFAULT_PROJECT = "default"


def _create_tables() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False, comment="admin | editor | viewer"),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
    )
    op.create_table(
        "memberships",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name=op.f("fk_memberships_project_id_projects"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_memberships_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "project_id", name=op.f("pk_memberships")),
    )
    with op.batch_alter_table("memberships", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_memberships_project_id"), ["project_id"], unique=False)


def _adopt_existing_rows() -> None:
    """The admin and the default project, owning everything already there."""
    now = datetime.now(UTC).replace(tzinfo=None)
    conn = op.get_bind()
    users = sa.table("users", sa.column("id"), sa.column("name"), sa.column("role"), sa.column("created_at"))
    projects = sa.table("projects", sa.column("id"), sa.column("name"), sa.column("created_at"))
    members = sa.table("memberships", sa.column("user_id"), sa.column("project_id"), sa.column("created_at"))
    conn.execute(users.insert().values(name=ADMIN_USER, role="admin", created_at=now))
    conn.execute(projects.insert().values(name=DEFAULT_PROJECT, created_at=now))
    admin_id = conn.scalar(sa.select(users.c.id).where(users.c.name == ADMIN_USER))
    project_id = conn.scalar(sa.select(projects.c.id).where(projects.c.name == DEFAULT_PROJECT))
    conn.execute(members.insert().values(user_id=admin_id, project_id=project_id, created_at=now))
    conn.execute(sa.table("api_keys", sa.column("user_id")).update().values(user_id=admin_id))
    conn.execute(sa.table("datasets", sa.column("project_id")).update().values(project_id=project_id))
    conn.execute(sa.table("jobs", sa.column("project_id")).update().values(project_id=project_id))


def upgrade() -> None:
    _create_tables()
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("user_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("read_only", sa.Boolean(), server_default=sa.false(), nullable=False,
                                      comment="Reads only, whatever the user's role."))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(), nullable=True,
                                      comment="Refused from then on (401); none: never."))
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("project_id", sa.Integer(), nullable=True,
                                      comment="Who may see the dataset and everything derived from it."))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("project_id", sa.Integer(), nullable=True,
                                      comment="The project of the dataset the job works on."))
    _adopt_existing_rows()
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.alter_column("user_id", existing_type=sa.Integer(), nullable=False)
        batch_op.create_index(batch_op.f("ix_api_keys_user_id"), ["user_id"], unique=False)
        batch_op.create_foreign_key(batch_op.f("fk_api_keys_user_id_users"), "users", ["user_id"], ["id"],
                                    ondelete="CASCADE")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.alter_column("project_id", existing_type=sa.Integer(), nullable=False,
                              existing_comment="Who may see the dataset and everything derived from it.")
        batch_op.create_index(batch_op.f("ix_datasets_project_id"), ["project_id"], unique=False)
        batch_op.create_foreign_key(batch_op.f("fk_datasets_project_id_projects"), "projects", ["project_id"], ["id"],
                                    ondelete="RESTRICT")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_project_id"), ["project_id"], unique=False)
        batch_op.create_foreign_key(batch_op.f("fk_jobs_project_id_projects"), "projects", ["project_id"], ["id"],
                                    ondelete="CASCADE")


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_jobs_project_id_projects"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_jobs_project_id"))
        batch_op.drop_column("project_id")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_datasets_project_id_projects"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_datasets_project_id"))
        batch_op.drop_column("project_id")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_api_keys_user_id_users"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_api_keys_user_id"))
        batch_op.drop_column("expires_at")
        batch_op.drop_column("read_only")
        batch_op.drop_column("user_id")
    with op.batch_alter_table("memberships", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memberships_project_id"))
    op.drop_table("memberships")
    op.drop_table("projects")
    op.drop_table("users")
