"""API keys' scopes

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

* ``api_keys.scopes``: what a key may do, space-separated (``lineage:write``, ``connections:read``,
  ``connections:write``). Every existing key was an ingest key, so the server default gives each
  ``lineage:write`` and nothing more: no key gains access to connections by the upgrade.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(
            sa.Column("scopes", sa.String(length=200), server_default="lineage:write", nullable=False)
        )


def downgrade() -> None:
    # Before scopes every key could ingest: a key that could not must not gain that by the downgrade, so
    # it is revoked (its owner creates a new one after upgrading again).
    op.execute(
        "UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP "
        "WHERE revoked_at IS NULL AND ' ' || scopes || ' ' NOT LIKE '% lineage:write %'"
    )
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("scopes")
