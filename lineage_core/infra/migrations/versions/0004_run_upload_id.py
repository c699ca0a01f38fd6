"""export runs: the UploadId of the run's multipart upload while it may still be pending

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

A nullable column added with ADD COLUMN (PostgreSQL and SQLite alike).
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("export_runs", sa.Column("upload_id", sa.String(length=1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("export_runs") as batch:
        batch.drop_column("upload_id")
