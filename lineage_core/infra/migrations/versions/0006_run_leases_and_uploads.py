"""export runs hold a lease; every multipart upload is a row until known completed or aborted; last tick

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

* ``export_runs.lease_owner`` / ``lease_expires_at``: the attempt that owns a running run, renewed by
  its worker while it works; ``export_runs.completing``: what the attempt's Complete step was about to
  put in place (expected ETag and figures), so a later attempt can find out whether it did.
* ``export_uploads``: one row per multipart upload an export opened. The UploadIds kept on
  ``export_runs.upload_id`` move there (still open), and the column goes.
* ``service_heartbeats``: when the schedule's tick last ran, readable by /healthz, /ops/ and /metrics.

Runs on PostgreSQL and SQLite (the column drop goes through a batch table rebuild on SQLite).
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("export_runs", sa.Column("lease_owner", sa.String(length=200), nullable=True))
    op.add_column("export_runs", sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("export_runs", sa.Column("completing", sa.Text(), nullable=True))
    op.create_table(
        "export_uploads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("connector_id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("upload_id", sa.String(length=1024), nullable=False),
        sa.Column("bucket", sa.String(length=63), nullable=False),
        sa.Column("object_key", sa.String(length=1100), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "open",
                "completing",
                "completed",
                "aborted",
                "gone",
                name="uploadstate",
                native_enum=False,
                length=20,
            ),
            nullable=False,
        ),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["export_runs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["connector_id"], ["connectors.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_export_uploads_connector_state", "export_uploads", ["connector_id", "state"])
    op.create_index("ix_export_uploads_run", "export_uploads", ["run_id"])
    op.create_table(
        "service_heartbeats",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    # The UploadIds runs kept: still pending as far as anyone knows, under the connector's export key.
    op.execute(
        sa.text(
            "INSERT INTO export_uploads"
            " (run_id, connector_id, owner, upload_id, bucket, object_key, state, opened_at)"
            " SELECT r.id, r.connector_id, NULL, r.upload_id, c.bucket,"
            " CASE WHEN c.prefix = '' THEN 'openlineage-events.jsonl'"
            " ELSE c.prefix || '/openlineage-events.jsonl' END,"
            " 'open', COALESCE(r.started_at, r.queued_at)"
            " FROM export_runs r JOIN connectors c ON c.id = r.connector_id"
            " WHERE r.upload_id IS NOT NULL AND c.bucket IS NOT NULL"
        )
    )
    with op.batch_alter_table("export_runs") as batch:
        batch.drop_column("upload_id")


def downgrade() -> None:
    op.add_column("export_runs", sa.Column("upload_id", sa.String(length=1024), nullable=True))
    op.execute(
        sa.text(
            "UPDATE export_runs SET upload_id = (SELECT MAX(u.upload_id) FROM export_uploads u "
            "WHERE u.run_id = export_runs.id AND u.state IN ('open', 'completing'))"
        )
    )
    op.drop_table("service_heartbeats")
    op.drop_index("ix_export_uploads_run", table_name="export_uploads")
    op.drop_index("ix_export_uploads_connector_state", table_name="export_uploads")
    op.drop_table("export_uploads")
    with op.batch_alter_table("export_runs") as batch:
        batch.drop_column("completing")
        batch.drop_column("lease_expires_at")
        batch.drop_column("lease_owner")
