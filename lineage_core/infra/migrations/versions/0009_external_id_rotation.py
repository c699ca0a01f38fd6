"""External ID rotation: the new and the old ID of a connector, and the last check of the old one

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

* ``connectors.rotation_state``: none, pending, verified or complete (lineage_core.setup.rotation);
  every existing connector starts at none.
* ``connectors.new_external_id``: the ID being rotated in, until Save verifies it;
  ``connectors.old_external_id``: the ID rotated out, once it has been. Each is unique, as
  ``external_id`` is; a CHECK ties which of them is set to the state.
* ``connectors.old_external_id_works`` / ``old_external_id_checked_at``: what the last AssumeRole with
  the old ID said (each export tries it), and when.

Runs on PostgreSQL and SQLite (the CHECK goes through a batch table rebuild on SQLite).
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# The same rule as lineage_core.infra.models.ROTATION_IDS_RULE, as it stood at this revision.
_ROTATION_IDS_RULE = (
    "(rotation_state = 'none' AND new_external_id IS NULL AND old_external_id IS NULL)"
    " OR (rotation_state = 'pending' AND new_external_id IS NOT NULL AND old_external_id IS NULL)"
    " OR (rotation_state IN ('verified', 'complete')"
    " AND new_external_id IS NULL AND old_external_id IS NOT NULL)"
)


def upgrade() -> None:
    with op.batch_alter_table("connectors") as batch:
        batch.add_column(
            sa.Column(
                "rotation_state",
                sa.Enum(
                    "none",
                    "pending",
                    "verified",
                    "complete",
                    name="rotationstate",
                    native_enum=False,
                    length=20,
                ),
                nullable=False,
                server_default="none",
            )
        )
        batch.add_column(sa.Column("new_external_id", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("old_external_id", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("old_external_id_works", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("old_external_id_checked_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_check_constraint("ck_connectors_rotation_ids", _ROTATION_IDS_RULE)
    op.create_index("uq_connectors_new_external_id", "connectors", ["new_external_id"], unique=True)
    op.create_index("uq_connectors_old_external_id", "connectors", ["old_external_id"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_connectors_old_external_id", table_name="connectors")
    op.drop_index("uq_connectors_new_external_id", table_name="connectors")
    with op.batch_alter_table("connectors") as batch:
        batch.drop_constraint("ck_connectors_rotation_ids", type_="check")
        batch.drop_column("old_external_id_checked_at")
        batch.drop_column("old_external_id_works")
        batch.drop_column("old_external_id")
        batch.drop_column("new_external_id")
        batch.drop_column("rotation_state")
