"""labels: a concept's label set (current labels, their history), the queue's batches and leases, the concept's
queue seed and the probe trained on its labels; the labeller role

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _who() -> list[sa.Column]:
    return [sa.Column("set_by", sa.String(length=200), nullable=False),
            sa.Column("set_at", sa.DateTime(), nullable=False)]


def upgrade() -> None:
    with op.batch_alter_table("concepts", schema=None) as batch_op:
        batch_op.add_column(sa.Column(
            "seed", sa.JSON(), nullable=True,
            comment="Where the labelling queue starts while one class has no label: an expression or a text query."))
        batch_op.add_column(sa.Column(
            "labelling", sa.JSON(), nullable=True,
            comment="The probe trained on the label set: version, labels it read (count, hash), estimate, curve."))
    op.create_table(
        "concept_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False,
                  comment="The note's position in its dataset (the row of the codes)."),
        sa.Column("label", sa.String(length=10), nullable=False, comment="positive | negative | skip"),
        sa.Column("source", sa.String(length=10), nullable=False, comment="queue | api | import | examples"),
        sa.Column("reason", sa.String(length=10), nullable=True,
                  comment="Why the queue handed the note out (seed | near_miss | uncertain | random); None otherwise."),
        sa.Column("set_by", sa.String(length=200), nullable=False, comment="The key's name (or cli) that set it."),
        sa.Column("set_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["concept_id"], ["concepts.id"], name=op.f("fk_concept_labels_concept_id_concepts"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"],
                                name=op.f("fk_concept_labels_document_id_documents"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_concept_labels")),
        sa.UniqueConstraint("concept_id", "document_id", name=op.f("uq_concept_labels_concept_id")),
    )
    op.create_index(op.f("ix_concept_labels_concept_id"), "concept_labels", ["concept_id"])
    op.create_index(op.f("ix_concept_labels_document_id"), "concept_labels", ["document_id"])
    op.create_table(
        "label_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=10), nullable=True, comment="The label after the change; None: removed."),
        sa.Column("previous", sa.String(length=10), nullable=True,
                  comment="The label before it; None: there was none."),
        sa.Column("action", sa.String(length=10), nullable=False, comment="set | delete | undo | import"),
        sa.Column("source", sa.String(length=10), nullable=False),
        sa.Column("reason", sa.String(length=10), nullable=True),
        *_who(),
        sa.ForeignKeyConstraint(["concept_id"], ["concepts.id"], name=op.f("fk_label_events_concept_id_concepts"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], name=op.f("fk_label_events_document_id_documents"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_events")),
    )
    op.create_index("ix_label_events_concept_document", "label_events", ["concept_id", "document_id"])
    op.create_table(
        "label_batches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("policy", sa.JSON(), nullable=False, comment="Phase (seed | probe), shares, seed, probe version."),
        sa.Column("items", sa.JSON(), nullable=False,
                  comment="[{document_id, position, reason}] in the order handed out."),
        sa.ForeignKeyConstraint(["concept_id"], ["concepts.id"], name=op.f("fk_label_batches_concept_id_concepts"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_batches")),
    )
    op.create_index(op.f("ix_label_batches_concept_id"), "label_batches", ["concept_id"])
    op.create_table(
        "label_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False, comment="The key's name it was handed to."),
        sa.Column("reason", sa.String(length=10), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("released", sa.Boolean(), nullable=False, comment="Answered: the note was labelled."),
        sa.ForeignKeyConstraint(["batch_id"], ["label_batches.id"], name=op.f("fk_label_leases_batch_id_label_batches"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["concept_id"], ["concepts.id"], name=op.f("fk_label_leases_concept_id_concepts"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], name=op.f("fk_label_leases_document_id_documents"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_leases")),
        sa.UniqueConstraint("concept_id", "document_id", name=op.f("uq_label_leases_concept_id")),
    )
    op.create_index(op.f("ix_label_leases_concept_id"), "label_leases", ["concept_id"])
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.alter_column("role", existing_type=sa.String(length=10), existing_nullable=False,
                              comment="admin | editor | labeller | viewer", existing_comment="admin | editor | viewer")


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.alter_column("role", existing_type=sa.String(length=10), existing_nullable=False,
                              comment="admin | editor | viewer", existing_comment="admin | editor | labeller | viewer")
    op.drop_index(op.f("ix_label_leases_concept_id"), table_name="label_leases")
    op.drop_table("label_leases")
    op.drop_index(op.f("ix_label_batches_concept_id"), table_name="label_batches")
    op.drop_table("label_batches")
    op.drop_index("ix_label_events_concept_document", table_name="label_events")
    op.drop_table("label_events")
    op.drop_index(op.f("ix_concept_labels_document_id"), table_name="concept_labels")
    op.drop_index(op.f("ix_concept_labels_concept_id"), table_name="concept_labels")
    op.drop_table("concept_labels")
    with op.batch_alter_table("concepts", schema=None) as batch_op:
        batch_op.drop_column("labelling")
        batch_op.drop_column("seed")
