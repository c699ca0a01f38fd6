"""lineage store: jobs, datasets, fields, job inputs/outputs, column lineage

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Plain create_table/create_index only, so it runs unchanged on PostgreSQL and SQLite (no ALTER of
existing tables, which SQLite would need batch mode for).
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=512), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("schema_version", sa.String(length=64), nullable=True),
        sa.Column("documentation_version", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "organization_id", "namespace", "name", name="uq_lineage_datasets_org_namespace_name"
        ),
    )
    op.create_table(
        "lineage_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=512), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("sql", sa.Text(), nullable=True),
        sa.Column("sql_dialect", sa.String(length=200), nullable=True),
        sa.Column("processing_type", sa.String(length=200), nullable=True),
        sa.Column("integration", sa.String(length=200), nullable=True),
        sa.Column("job_type", sa.String(length=200), nullable=True),
        sa.Column("lineage_event_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lineage_version", sa.String(length=64), nullable=True),
        sa.Column("documentation_version", sa.String(length=64), nullable=True),
        sa.Column("sql_version", sa.String(length=64), nullable=True),
        sa.Column("job_type_version", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "organization_id", "namespace", "name", name="uq_lineage_jobs_org_namespace_name"
        ),
    )
    op.create_index("ix_lineage_jobs_org_id", "lineage_jobs", ["organization_id", "id"], unique=False)
    op.create_table(
        "lineage_dataset_fields",
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("type", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["lineage_datasets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("dataset_id", "position", name="pk_lineage_dataset_fields"),
        sa.UniqueConstraint("dataset_id", "name", name="uq_lineage_dataset_fields_dataset_name"),
    )
    op.create_table(
        "lineage_job_datasets",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("direction", sa.String(length=6), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["lineage_datasets.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job_id"], ["lineage_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "direction", "position", name="pk_lineage_job_datasets"),
        sa.UniqueConstraint("job_id", "direction", "dataset_id", name="uq_lineage_job_datasets_job_dataset"),
    )
    op.create_index("ix_lineage_job_datasets_dataset", "lineage_job_datasets", ["dataset_id"], unique=False)
    op.create_table(
        "lineage_column_lineage",
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
        # Dataset ids without foreign keys: see LineageColumnLineage (one lookup per row is the cost).
        sa.ForeignKeyConstraint(["job_id"], ["lineage_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "position", name="pk_lineage_column_lineage"),
    )


def downgrade() -> None:
    op.drop_table("lineage_column_lineage")
    op.drop_index("ix_lineage_job_datasets_dataset", table_name="lineage_job_datasets")
    op.drop_table("lineage_job_datasets")
    op.drop_table("lineage_dataset_fields")
    op.drop_index("ix_lineage_jobs_org_id", table_name="lineage_jobs")
    op.drop_table("lineage_jobs")
    op.drop_table("lineage_datasets")
