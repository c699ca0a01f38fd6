"""Tables of organizations, users and export connectors.

The database is the source of truth for connectors, their schedule and the history of their exports;
Redis only holds queues, so everything the scheduler needs can be derived from these rows.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column, relationship

from lineage_core.infra.db import Base


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on PostgreSQL and SQLite alike (SQLite drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _enum(enum_class: type[enum.StrEnum]) -> Enum:
    # Store the lowercase values, checked by a VARCHAR + CHECK rather than a PostgreSQL ENUM type,
    # so adding a member is a plain migration on both databases.
    return Enum(
        enum_class,
        native_enum=False,
        length=20,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


class Role(enum.StrEnum):
    ORG_ADMIN = "org_admin"
    OPERATOR = "operator"


class ConnectorStatus(enum.StrEnum):
    DRAFT = "draft"  # settings entered, write check not passed yet
    ACTIVE = "active"  # write check passed; exports run on schedule
    PAUSED = "paused"  # an admin stopped the schedule


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Organization(Base):
    __tablename__ = "organizations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    users: Mapped[list[User]] = relationship(back_populates="organization")


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[Role] = mapped_column(_enum(Role))
    # Operators are vendor staff and belong to no organization.
    organization_id: Mapped[int | None] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    # Every session cookie carries the version it was signed in at; signing out, a new password or
    # disabling the user adds one, which ends every copy of every earlier cookie (portal.security).
    session_version: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # A disabled user cannot sign in and has no session; the row (and its audit trail) stays.
    disabled_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    organization: Mapped[Organization | None] = relationship(back_populates="users")


class RotationState(enum.StrEnum):
    """Where a connector's External ID rotation stands (transitions: lineage_core.setup.rotation)."""

    NONE = "none"  # one External ID, in use
    PENDING = "pending"  # a new ID is minted; exports still use the current one until Save verifies it
    VERIFIED = "verified"  # exports use the new ID; the old one may still be trusted by the role
    COMPLETE = "complete"  # the old ID no longer works: only the new one is trusted


# Which of the rotation's IDs each state holds, enforced by the database (migration 0009).
ROTATION_IDS_RULE = (
    "(rotation_state = 'none' AND new_external_id IS NULL AND old_external_id IS NULL)"
    " OR (rotation_state = 'pending' AND new_external_id IS NOT NULL AND old_external_id IS NULL)"
    " OR (rotation_state IN ('verified', 'complete')"
    " AND new_external_id IS NULL AND old_external_id IS NOT NULL)"
)


class Connector(Base):
    """One "account" of the OpenLineage export: a bucket, a prefix and the customer role that writes to it.

    Settings fields are nullable because the draft exists from "Start Setup" on: its External ID is
    minted then, so that the template the admin downloads and the record Save checks always agree.
    """

    __tablename__ = "connectors"
    __table_args__ = (
        Index("ix_connectors_org_status", "organization_id", "status"),
        # The scheduler's tick reads only the due rows through this index.
        Index("ix_connectors_status_next_export", "status", "next_export_at"),
        # An External ID names one connector, whichever column holds it: each column is unique, and
        # lineage_core.setup.rotations mints a new ID only when none of the three columns has it.
        Index("uq_connectors_new_external_id", "new_external_id", unique=True),
        Index("uq_connectors_old_external_id", "old_external_id", unique=True),
        CheckConstraint(ROTATION_IDS_RULE, name="ck_connectors_rotation_ids"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    status: Mapped[ConnectorStatus] = mapped_column(_enum(ConnectorStatus), default=ConnectorStatus.DRAFT)
    external_id: Mapped[str] = mapped_column(String(128), unique=True)  # the one exports use

    # External ID rotation (lineage_core.setup.rotations): the ID being rotated in until Save verifies
    # it, the ID rotated out afterwards, and what the last AssumeRole with that old ID said, and when.
    rotation_state: Mapped[RotationState] = mapped_column(
        _enum(RotationState), default=RotationState.NONE, server_default=RotationState.NONE.value
    )
    new_external_id: Mapped[str | None] = mapped_column(String(128))
    old_external_id: Mapped[str | None] = mapped_column(String(128))
    old_external_id_works: Mapped[bool | None] = mapped_column(Boolean)
    old_external_id_checked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    bucket: Mapped[str | None] = mapped_column(String(63))
    prefix: Mapped[str] = mapped_column(String(1024), default="")
    account_id: Mapped[str | None] = mapped_column(String(12))
    role_name: Mapped[str | None] = mapped_column(String(64))
    role_path: Mapped[str] = mapped_column(String(512), default="/")
    permissions_boundary_arn: Mapped[str | None] = mapped_column(String(2048))
    kms_key_arn: Mapped[str | None] = mapped_column(String(2048))
    interval_days: Mapped[int] = mapped_column(Integer, default=14)

    # Resolved and stored by a passing write check.
    role_arn: Mapped[str | None] = mapped_column(String(2048))
    bucket_region: Mapped[str | None] = mapped_column(String(32))
    verified_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_check_error: Mapped[str | None] = mapped_column(Text)

    # When the schedule next wants an export; derived from the runs by lineage_core.schedule.rules and
    # stored so that the tick's query costs what the number of due connectors costs.
    next_export_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, onupdate=utcnow)

    runs: Mapped[list[ExportRun]] = relationship(
        back_populates="connector", cascade="all, delete-orphan", passive_deletes=True
    )

    @property
    def settings_complete(self) -> bool:
        return bool(self.bucket and self.account_id and self.role_name)


class ExportRun(Base):
    """One attempt to export a connector's snapshot."""

    __tablename__ = "export_runs"
    __table_args__ = (
        Index("ix_export_runs_connector_queued", "connector_id", "queued_at"),
        # At most one export of a connector queued or running, enforced by the database itself so
        # that concurrent ticks, "Export now" clicks and web processes cannot race past it.
        Index(
            "uq_export_runs_one_in_flight",
            "connector_id",
            unique=True,
            postgresql_where=text("status IN ('queued', 'running')"),
            sqlite_where=text("status IN ('queued', 'running')"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    connector_id: Mapped[int] = mapped_column(ForeignKey("connectors.id", ondelete="CASCADE"))
    status: Mapped[RunStatus] = mapped_column(_enum(RunStatus))
    trigger: Mapped[str] = mapped_column(String(20), default="schedule")
    job_id: Mapped[str | None] = mapped_column(String(128))
    queued_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    events: Mapped[int | None] = mapped_column(Integer)
    bytes: Mapped[int | None] = mapped_column(BigInteger)
    etag: Mapped[str | None] = mapped_column(String(200))
    version_id: Mapped[str | None] = mapped_column(String(1024))
    # The 300 KB rule (lineage_core.export.events): events written with less detail, and jobs left
    # out of the file. NULL for runs that did not succeed, and for runs recorded before they were kept.
    trimmed: Mapped[int | None] = mapped_column(Integer)
    omitted: Mapped[int | None] = mapped_column(Integer)
    # The export object's full-object CRC64NVME checksum (base64, as S3 verified and stores it), and why
    # its event-count tag is missing when it is (lineage_core.export.object_metadata). NULL for runs
    # that did not succeed, and for runs recorded before they were kept.
    checksum_crc64nvme: Mapped[str | None] = mapped_column(String(16))
    tagging_error: Mapped[str | None] = mapped_column(Text)
    # The lease of a running run (lineage_core.export.lease): the attempt that owns it, and until when.
    # Its worker renews it while it works; only an expired lease lets the tick close the run or another
    # attempt (an RQ retry) take it over, and an attempt that lost it never completes its upload.
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # Set (JSON: owner, expected ETag, figures) just before the Complete step, so that an attempt whose
    # outcome could not be recorded is found out by the next one (lineage_core.export.recovery).
    completing: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)

    connector: Mapped[Connector] = relationship(back_populates="runs")


class UploadState(enum.StrEnum):
    OPEN = "open"  # S3 holds it (parts stored, invisible) as far as we know
    COMPLETING = "completing"  # its Complete was sent; the outcome is not recorded yet
    COMPLETED = "completed"  # S3 completed it: it is the object
    ABORTED = "aborted"  # we aborted it
    GONE = "gone"  # S3 no longer knows it (completed, aborted or expired by a lifecycle rule)


class ExportUpload(Base):
    """A multipart upload an export opened, kept until it is known completed or aborted.

    A run may open several (one per attempt: RQ retries, takeovers); an abort may fail. Every row still
    ``open`` is aborted by the connector's next successful export (lineage_core.export.leftovers).
    """

    __tablename__ = "export_uploads"
    __table_args__ = (
        Index("ix_export_uploads_connector_state", "connector_id", "state"),
        Index("ix_export_uploads_run", "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("export_runs.id", ondelete="CASCADE"))
    connector_id: Mapped[int] = mapped_column(ForeignKey("connectors.id", ondelete="CASCADE"))
    owner: Mapped[str | None] = mapped_column(String(200))  # the attempt (lease owner) that opened it
    upload_id: Mapped[str] = mapped_column(String(1024))
    bucket: Mapped[str] = mapped_column(String(63))
    object_key: Mapped[str] = mapped_column(String(1100))
    state: Mapped[UploadState] = mapped_column(_enum(UploadState))
    opened_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class ServiceHeartbeat(Base):
    """When a periodic piece of the service last did its work (``tick``: the schedule's tick)."""

    __tablename__ = "service_heartbeats"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime())
    detail: Mapped[str | None] = mapped_column(Text)


class ApiKey(Base):
    """An organization's key for the OpenLineage ingest API. Only a hash of the secret is stored."""

    __tablename__ = "api_keys"
    __table_args__ = (UniqueConstraint("key_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    key_hash: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # Space-separated scopes (lineage_core.accounts.api_keys.Scope); keys older than scopes could only ingest.
    scopes: Mapped[str] = mapped_column(String(200), default="lineage:write", server_default="lineage:write")


class AuditEvent(Base):
    """One thing a person (or the CLI) did: who, when, from where, to what, and what changed.

    Append-only: the application only inserts, and the database refuses UPDATE and DELETE of these rows
    (triggers of migration 0007). No foreign keys, so that deleting a connector, a key or a user never
    touches the trail; ``details`` (JSON) never holds a secret (lineage_core.ops.audit).
    """

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_org_at", "organization_id", "at"),
        Index("ix_audit_events_action_at", "action", "at"),
        Index("ix_audit_events_at", "at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    organization_id: Mapped[int | None] = mapped_column(Integer)
    actor_user_id: Mapped[int | None] = mapped_column(Integer)
    # The actor's e-mail as it was then (or what a failed sign-in typed), "cli", or an API key's prefix.
    actor: Mapped[str] = mapped_column(String(320))
    action: Mapped[str] = mapped_column(String(64))
    target_type: Mapped[str | None] = mapped_column(String(32))
    target_id: Mapped[int | None] = mapped_column(BigInteger)
    address: Mapped[str | None] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(String(64))
    details: Mapped[str | None] = mapped_column(Text)
