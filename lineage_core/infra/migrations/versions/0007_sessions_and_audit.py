"""users' session version and disabled flag; the append-only audit trail

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

* ``users.session_version``: each session cookie carries it; signing out, a password change or
  disabling the user adds one, so every earlier copy of a cookie stops working.
* ``users.disabled_at``: a disabled user cannot sign in.
* ``audit_events``: who did what, when, from where. Triggers refuse UPDATE and DELETE of its rows on
  PostgreSQL and SQLite, so the application can only append (TRUNCATE, an operator's deliberate act
  outside the app, is not refused).
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_PG_FUNCTION = """
CREATE FUNCTION audit_events_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP;
END;
$$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("session_version", sa.Integer(), server_default=sa.text("0"), nullable=False))
        batch.add_column(sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=True),
        sa.Column("actor_user_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=320), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target_type", sa.String(length=32), nullable=True),
        sa.Column("target_id", sa.BigInteger(), nullable=True),
        sa.Column("address", sa.String(length=64), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("details", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_events_org_at", "audit_events", ["organization_id", "at"])
    op.create_index("ix_audit_events_action_at", "audit_events", ["action", "at"])
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(
            "CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
            "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()"
        )
    else:
        for operation in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_events_no_{operation.lower()} BEFORE {operation} ON audit_events "
                f"BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: {operation} refused'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION IF EXISTS audit_events_append_only()")
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_index("ix_audit_events_action_at", table_name="audit_events")
    op.drop_index("ix_audit_events_org_at", table_name="audit_events")
    op.drop_table("audit_events")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("disabled_at")
        batch.drop_column("session_version")
