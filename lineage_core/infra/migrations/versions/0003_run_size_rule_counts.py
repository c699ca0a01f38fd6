"""export runs: how many events the 300 KB rule trimmed and how many jobs it left out

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Nullable columns added with ADD COLUMN, which PostgreSQL and SQLite both do in place. Runs recorded
before this revision keep NULL: the counts were not kept then.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("export_runs", sa.Column("trimmed", sa.Integer(), nullable=True))
    op.add_column("export_runs", sa.Column("omitted", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("export_runs") as batch:  # SQLite drops columns through a table copy
        batch.drop_column("omitted")
        batch.drop_column("trimmed")
