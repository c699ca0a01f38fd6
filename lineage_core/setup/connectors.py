"""The connector store: drafts, settings changes, activation and the queries the portal needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus, utcnow
from lineage_core.schedule.rules import refresh_next_export
from lineage_core.setup.destination import Destination, new_external_id, role_arn
from lineage_core.setup.write_check import WriteCheckResult

# Changing any of these changes the role or the policy the customer deployed, so the connector goes
# back through download and write check before it exports again.
ROLE_FIELDS = (
    "bucket",
    "prefix",
    "account_id",
    "role_name",
    "role_path",
    "permissions_boundary_arn",
    "kms_key_arn",
)


@dataclass(frozen=True)
class ConnectorSettings:
    bucket: str
    prefix: str
    account_id: str
    role_name: str
    role_path: str
    interval_days: int
    kms_key_arn: str | None
    permissions_boundary_arn: str | None


def create_draft(session: Session, organization_id: int) -> Connector:
    connector = Connector(
        organization_id=organization_id, status=ConnectorStatus.DRAFT, external_id=new_external_id()
    )
    session.add(connector)
    session.flush()
    return connector


def get_for_org(session: Session, organization_id: int, connector_id: int) -> Connector | None:
    """The connector only if it belongs to the organization: the one door to a connector by id."""
    return session.scalar(
        select(Connector).where(Connector.id == connector_id, Connector.organization_id == organization_id)
    )


def list_for_org(session: Session, organization_id: int) -> Sequence[Connector]:
    return session.scalars(
        select(Connector).where(Connector.organization_id == organization_id).order_by(Connector.id)
    ).all()


def apply_settings(connector: Connector, values: ConnectorSettings) -> bool:
    """Store the wizard's values. Returns True when the role changed and must be checked again."""
    role_changed = any(getattr(connector, name) != getattr(values, name) for name in ROLE_FIELDS)
    for name, value in vars(values).items():
        setattr(connector, name, value)
    if role_changed:
        connector.status = ConnectorStatus.DRAFT
        connector.role_arn = None
        connector.bucket_region = None
        connector.verified_at = None
    return role_changed


def destination_of(connector: Connector, partition: str) -> Destination:
    """The destination the write check proves, with the role ARN built from the connector's settings.

    Args:
        partition: the AWS partition of our region (``aws``, ``aws-cn``...), which the role's ARN names.
    """
    if not connector.settings_complete:
        raise ValueError("the connector's destination settings are not complete")
    assert connector.bucket and connector.account_id and connector.role_name
    return Destination(
        bucket=connector.bucket,
        prefix=connector.prefix,
        account_id=connector.account_id,
        role_arn=role_arn(partition, connector.account_id, connector.role_path, connector.role_name),
        external_id=connector.external_id,
        kms_key_arn=connector.kms_key_arn,
    )


def activate(connector: Connector, result: WriteCheckResult) -> bool:
    """Mark the write check passed. Returns True when the connector was not active before."""
    was_active = connector.status is ConnectorStatus.ACTIVE
    connector.status = ConnectorStatus.ACTIVE
    connector.role_arn = result.role_arn
    connector.bucket_region = result.bucket_region
    connector.verified_at = utcnow()
    connector.last_check_error = None
    return not was_active


def last_run(session: Session, connector_id: int) -> ExportRun | None:
    """The most recent run in any state."""
    return session.scalar(
        select(ExportRun)
        .where(ExportRun.connector_id == connector_id)
        .order_by(ExportRun.queued_at.desc(), ExportRun.id.desc())
        .limit(1)
    )


@dataclass(frozen=True)
class CardStatus:
    """What the connector's card shows about exports."""

    last_finished: ExportRun | None
    in_flight: ExportRun | None
    # When the current run of failures began: the first failed export after the last successful one
    # (after the first export ever, when none succeeded). None when the last export succeeded.
    failing_since: datetime | None = None


def card_status(session: Session, connector_id: int) -> CardStatus:
    last_finished = session.scalar(
        select(ExportRun)
        .where(
            ExportRun.connector_id == connector_id,
            ExportRun.status.in_([RunStatus.SUCCEEDED, RunStatus.FAILED]),
        )
        .order_by(ExportRun.finished_at.desc(), ExportRun.id.desc())
        .limit(1)
    )
    in_flight = session.scalar(
        select(ExportRun)
        .where(
            ExportRun.connector_id == connector_id,
            ExportRun.status.in_([RunStatus.QUEUED, RunStatus.RUNNING]),
        )
        .limit(1)
    )
    failing_since = None
    if last_finished is not None and last_finished.status is RunStatus.FAILED:
        last_success = session.scalar(
            select(func.max(ExportRun.finished_at)).where(
                ExportRun.connector_id == connector_id, ExportRun.status == RunStatus.SUCCEEDED
            )
        )
        failures = select(func.min(ExportRun.finished_at)).where(
            ExportRun.connector_id == connector_id, ExportRun.status == RunStatus.FAILED
        )
        if last_success is not None:
            failures = failures.where(ExportRun.finished_at > last_success)
        failing_since = session.scalar(failures)
    return CardStatus(last_finished=last_finished, in_flight=in_flight, failing_since=failing_since)


def same_destination(session: Session, connector: Connector, bucket: str, prefix: str) -> Connector | None:
    """Another connector, of any organization, that exports to ``s3://bucket/prefix`` too.

    Both would write the one file ``<prefix>/openlineage-events.jsonl`` and overwrite each other's
    export. What counts: a saved connector (active or paused) of any organization, and a draft of the
    same organization (its admin can finish or delete it). Another organization's unfinished draft
    does not hold a destination: it may never be saved, and Save checks again.
    """
    return session.scalar(
        select(Connector)
        .where(
            Connector.bucket == bucket,
            Connector.prefix == prefix,
            Connector.id != connector.id,
            or_(
                Connector.status != ConnectorStatus.DRAFT,
                Connector.organization_id == connector.organization_id,
            ),
        )
        .order_by(Connector.id)
        .limit(1)
    )


def history(session: Session, connector_id: int, limit: int = 100) -> Sequence[ExportRun]:
    return session.scalars(
        select(ExportRun)
        .where(ExportRun.connector_id == connector_id)
        .order_by(ExportRun.queued_at.desc(), ExportRun.id.desc())
        .limit(limit)
    ).all()


def set_paused(session: Session, connector: Connector, paused: bool) -> bool:
    """Pause an active connector's schedule, or resume a paused one. Returns whether anything changed.

    Pausing cancels an export that is queued but not started (its job then finds no run and does
    nothing); one already running finishes. A resumed connector that is overdue is due at once.
    """
    if paused and connector.status is ConnectorStatus.ACTIVE:
        connector.status = ConnectorStatus.PAUSED
        connector.next_export_at = None
        session.execute(
            delete(ExportRun).where(
                ExportRun.connector_id == connector.id, ExportRun.status == RunStatus.QUEUED
            )
        )
        return True
    if not paused and connector.status is ConnectorStatus.PAUSED:
        connector.status = ConnectorStatus.ACTIVE
        refresh_next_export(session, connector)
        return True
    return False
