"""lineage store: column lineage and table lineage derived from jobs' SQL, and what each derivation gave

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

New tables and indexes only (create_table/create_index), so it runs unchanged on PostgreSQL and SQLite.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_derivations",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("source_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("edges", sa.Integer(), nullable=False),
        sa.Column("problems", sa.Text(), nullable=True),
        sa.Column("unmatched_tables", sa.Text(), nullable=True),
        sa.Column("derived_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["lineage_jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_index(
        "ix_lineage_derivations_org_status", "lineage_derivations", ["organization_id", "status"]
    )
    op.create_table(
        "lineage_derived_column_lineage",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("output_dataset_id", sa.Integer(), nullable=False),
        sa.Column("output_field", sa.String(length=1024), nullable=True),
        sa.Column("input_index", sa.Integer(), nullable=False),
        sa.Column("input_dataset_id", sa.Integer(), nullable=False),
        sa.Column("input_field", sa.String(length=1024), nullable=False),
        sa.Column("transformation_type", sa.String(length=16), nullable=True),
        sa.Column("transformation_subtype", sa.String(length=200), nullable=True),
        sa.Column("masking", sa.Boolean(), nullable=True),
        sa.Column("transformation_description", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["lineage_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "position", name="pk_lineage_derived_column_lineage"),
    )
    op.create_table(
        "lineage_derived_job_datasets",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("direction", sa.String(length=6), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["lineage_jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["dataset_id"], ["lineage_datasets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "direction", "position", name="pk_lineage_derived_job_datasets"),
    )
    op.create_table(
        "lineage_derivation_watermarks",
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("changes_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("engine_revision", sa.String(length=64), nullable=False),
        sa.Column("derived_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("organization_id"),
    )
    # "What changed since", for the derivation's periodic check (a scan of every org's rows otherwise).
    op.create_index("ix_lineage_jobs_org_updated", "lineage_jobs", ["organization_id", "updated_at"])
    op.create_index("ix_lineage_datasets_org_updated", "lineage_datasets", ["organization_id", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_lineage_datasets_org_updated", table_name="lineage_datasets")
    op.drop_index("ix_lineage_jobs_org_updated", table_name="lineage_jobs")
    op.drop_table("lineage_derivation_watermarks")
    op.drop_table("lineage_derived_job_datasets")
    op.drop_table("lineage_derived_column_lineage")
    op.drop_index("ix_lineage_derivations_org_status", table_name="lineage_derivations")
    op.drop_table("lineage_derivations")
