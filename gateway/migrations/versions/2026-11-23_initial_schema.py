"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-23 00:40:05.189974
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_keys',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False, comment='Public part of the key, for lookup.'),
    sa.Column('key_hash', sa.String(length=64), nullable=False, comment='SHA-256 of the whole key, hex.'),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_used_at', sa.DateTime(), nullable=True),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('name', name=op.f('uq_api_keys_name')),
    sa.UniqueConstraint('prefix', name=op.f('uq_api_keys_prefix'))
    )
    op.create_table('artifacts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uri', sa.Text(), nullable=False),
    sa.Column('kind', sa.String(length=50), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('owner_type', sa.String(length=50), nullable=True),
    sa.Column('owner_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_artifacts')),
    sa.UniqueConstraint('uri', name=op.f('uq_artifacts_uri'))
    )
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_artifacts_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_artifacts_owner_type'), ['owner_type'], unique=False)

    op.create_table('audit_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.Column('api_key_id', sa.Integer(), nullable=True),
    sa.Column('actor', sa.String(length=100), nullable=False),
    sa.Column('action', sa.String(length=100), nullable=False),
    sa.Column('target_type', sa.String(length=50), nullable=True),
    sa.Column('target_id', sa.String(length=100), nullable=True),
    sa.Column('request_id', sa.String(length=64), nullable=True),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['api_key_id'], ['api_keys.id'], name=op.f('fk_audit_events_api_key_id_api_keys'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_events'))
    )
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_events_action'), ['action'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_events_at'), ['at'], unique=False)

    op.create_table('datasets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('format', sa.String(length=10), nullable=False),
    sa.Column('source_filename', sa.String(length=300), nullable=True),
    sa.Column('n_documents', sa.Integer(), nullable=False),
    sa.Column('size_bytes', sa.BigInteger(), nullable=False, comment='Upload size.'),
    sa.Column('text_bytes', sa.BigInteger(), nullable=False, comment='Sum of document sizes, UTF-8.'),
    sa.Column('column_mapping', sa.JSON(), nullable=False),
    sa.Column('label_counts', sa.JSON(), nullable=False),
    sa.Column('snapshot_artifact_id', sa.Integer(), nullable=True),
    sa.Column('created_by_key_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['created_by_key_id'], ['api_keys.id'], name=op.f('fk_datasets_created_by_key_id_api_keys'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['snapshot_artifact_id'], ['artifacts.id'], name=op.f('fk_datasets_snapshot_artifact_id_artifacts'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_datasets'))
    )
    op.create_table('jobs',
    sa.Column('id', sa.String(length=80), nullable=False, comment='Deterministic: kind + hash of payload.'),
    sa.Column('kind', sa.String(length=50), nullable=False),
    sa.Column('queue', sa.String(length=30), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('progress_done', sa.Integer(), nullable=False),
    sa.Column('progress_total', sa.Integer(), nullable=True),
    sa.Column('progress_unit', sa.String(length=30), nullable=False),
    sa.Column('rate', sa.Double(), nullable=True),
    sa.Column('eta_seconds', sa.Double(), nullable=True),
    sa.Column('message', sa.String(length=300), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('created_by_key_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=True),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['created_by_key_id'], ['api_keys.id'], name=op.f('fk_jobs_created_by_key_id_api_keys'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_jobs_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_status'), ['status'], unique=False)

    op.create_table('documents',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False, comment='0-based order in the upload; row index in every artifact.'),
    sa.Column('external_id', sa.String(length=300), nullable=True),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.Column('n_chars', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_documents_dataset_id_datasets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_documents')),
    sa.UniqueConstraint('dataset_id', 'position', name=op.f('uq_documents_dataset_id'))
    )
    with op.batch_alter_table('documents', schema=None) as batch_op:
        batch_op.create_index('ix_documents_dataset_id_external_id', ['dataset_id', 'external_id'], unique=True)

    op.create_table('embedding_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=300), nullable=False),
    sa.Column('model_path', sa.Text(), nullable=True),
    sa.Column('pooling', sa.String(length=10), nullable=False),
    sa.Column('normalize', sa.Boolean(), nullable=False),
    sa.Column('max_length', sa.Integer(), nullable=True),
    sa.Column('dim', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('job_id', sa.String(length=80), nullable=True),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('n_documents', sa.Integer(), nullable=True),
    sa.Column('n_chunks', sa.Integer(), nullable=True),
    sa.Column('n_tokens', sa.Integer(), nullable=True),
    sa.Column('docs_per_s', sa.Double(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_embedding_runs_dataset_id_datasets'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_embedding_runs_job_id_jobs'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_embedding_runs'))
    )
    with op.batch_alter_table('embedding_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_embedding_runs_dataset_id'), ['dataset_id'], unique=False)

    op.create_table('sae_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('embedding_run_id', sa.Integer(), nullable=False),
    sa.Column('sweep_id', sa.String(length=64), nullable=True, comment='Runs requested together.'),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('job_id', sa.String(length=80), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('d', sa.Integer(), nullable=True),
    sa.Column('n_latents', sa.Integer(), nullable=True),
    sa.Column('k', sa.Integer(), nullable=True),
    sa.Column('imported', sa.Boolean(), nullable=False),
    sa.Column('source', sa.Text(), nullable=True, comment='Where an imported SAE came from.'),
    sa.Column('metrics', sa.JSON(), nullable=True, comment='Final held-out figures.'),
    sa.Column('loss_curve', sa.JSON(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['embedding_run_id'], ['embedding_runs.id'], name=op.f('fk_sae_runs_embedding_run_id_embedding_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_sae_runs_job_id_jobs'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sae_runs'))
    )
    with op.batch_alter_table('sae_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sae_runs_embedding_run_id'), ['embedding_run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_sae_runs_sweep_id'), ['sweep_id'], unique=False)

    op.create_table('concepts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sae_run_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False, comment='expression | probe'),
    sa.Column('expression', sa.Text(), nullable=True),
    sa.Column('probe', sa.JSON(), nullable=True, comment='Non-zero weights by feature index, intercept, C.'),
    sa.Column('metrics', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['sae_run_id'], ['sae_runs.id'], name=op.f('fk_concepts_sae_run_id_sae_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_concepts'))
    )
    with op.batch_alter_table('concepts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_concepts_sae_run_id'), ['sae_run_id'], unique=False)

    op.create_table('families',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sae_run_id', sa.Integer(), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('root_index', sa.Integer(), nullable=False, comment='Feature index of the parent.'),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=True),
    sa.ForeignKeyConstraint(['sae_run_id'], ['sae_runs.id'], name=op.f('fk_families_sae_run_id_sae_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_families'))
    )
    with op.batch_alter_table('families', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_families_sae_run_id'), ['sae_run_id'], unique=False)

    op.create_table('features',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sae_run_id', sa.Integer(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False, comment='Latent index in the SAE, 0-based.'),
    sa.Column('density', sa.Double(), nullable=False, comment='Fraction of documents where it fires.'),
    sa.Column('mean_activation', sa.Double(), nullable=False),
    sa.Column('max_activation', sa.Double(), nullable=False),
    sa.Column('histogram', sa.JSON(), nullable=False),
    sa.Column('neighbours', sa.JSON(), nullable=False, comment='Top co-occurring and decoder-similar.'),
    sa.Column('best_interpretation_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['sae_run_id'], ['sae_runs.id'], name=op.f('fk_features_sae_run_id_sae_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_features')),
    sa.UniqueConstraint('sae_run_id', 'index', name=op.f('uq_features_sae_run_id'))
    )
    op.create_table('family_members',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('family_id', sa.Integer(), nullable=False),
    sa.Column('feature_index', sa.Integer(), nullable=False),
    sa.Column('parent_index', sa.Integer(), nullable=True),
    sa.Column('depth', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['family_id'], ['families.id'], name=op.f('fk_family_members_family_id_families'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_family_members')),
    sa.UniqueConstraint('family_id', 'feature_index', name=op.f('uq_family_members_family_id'))
    )
    with op.batch_alter_table('family_members', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_family_members_feature_index'), ['feature_index'], unique=False)

    op.create_table('interpretations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('feature_id', sa.Integer(), nullable=False),
    sa.Column('backend', sa.String(length=30), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('prompt_version', sa.String(length=30), nullable=True),
    sa.Column('label', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('score_embedding', sa.Double(), nullable=True),
    sa.Column('score_detection', sa.Double(), nullable=True),
    sa.Column('score', sa.Double(), nullable=True, comment='The score used for best-of-n.'),
    sa.Column('reliable', sa.Boolean(), nullable=True),
    sa.Column('evidence', sa.JSON(), nullable=False, comment='Document ids shown, never text.'),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['feature_id'], ['features.id'], name=op.f('fk_interpretations_feature_id_features'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_interpretations'))
    )
    with op.batch_alter_table('interpretations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_interpretations_feature_id'), ['feature_id'], unique=False)

    # The features <-> interpretations cycle: this key is added once both tables exist.
    with op.batch_alter_table('features', schema=None) as batch_op:
        batch_op.create_foreign_key(
            batch_op.f('fk_features_best_interpretation_id_interpretations'),
            'interpretations', ['best_interpretation_id'], ['id'], ondelete='SET NULL',
        )


def downgrade() -> None:
    with op.batch_alter_table('features', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_features_best_interpretation_id_interpretations'), type_='foreignkey')
    with op.batch_alter_table('interpretations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_interpretations_feature_id'))

    op.drop_table('interpretations')
    with op.batch_alter_table('family_members', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_family_members_feature_index'))

    op.drop_table('family_members')
    op.drop_table('features')
    with op.batch_alter_table('families', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_families_sae_run_id'))

    op.drop_table('families')
    with op.batch_alter_table('concepts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_concepts_sae_run_id'))

    op.drop_table('concepts')
    with op.batch_alter_table('sae_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sae_runs_sweep_id'))
        batch_op.drop_index(batch_op.f('ix_sae_runs_embedding_run_id'))

    op.drop_table('sae_runs')
    with op.batch_alter_table('embedding_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_embedding_runs_dataset_id'))

    op.drop_table('embedding_runs')
    with op.batch_alter_table('documents', schema=None) as batch_op:
        batch_op.drop_index('ix_documents_dataset_id_external_id')

    op.drop_table('documents')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_jobs_status'))
        batch_op.drop_index(batch_op.f('ix_jobs_kind'))

    op.drop_table('jobs')
    op.drop_table('datasets')
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_events_at'))
        batch_op.drop_index(batch_op.f('ix_audit_events_action'))

    op.drop_table('audit_events')
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_artifacts_owner_type'))
        batch_op.drop_index(batch_op.f('ix_artifacts_owner_id'))

    op.drop_table('artifacts')
    op.drop_table('api_keys')
