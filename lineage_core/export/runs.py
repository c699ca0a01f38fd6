"""An export run's lifecycle in the database: claimed ``queued`` → ``running``, then closed once.

The contract with :mod:`lineage_core.export.queue` (which writes the run ``queued`` before enqueueing
its job), with the scheduler's tick (which closes runs whose lease expired) and between attempts
(:mod:`lineage_core.export.lease`):

* :func:`claim` moves the run to ``running`` under a new lease, atomically, and commits. It takes a
  ``queued`` run, or a ``running`` run whose lease expired: that is how RQ's retry takes over its own
  run when the attempt before could not even requeue it (the database was down). A run whose lease is
  live is waited for up to one lease; a run that is neither (closed by the tick, already run, deleted
  with its connector) is left alone.
* :func:`close_succeeded` and :func:`close_failed` close it only while this attempt still holds its
  lease (the tick or a takeover may have acted meanwhile), and refresh the connector's next export time.
* :func:`requeue_for_retry` puts it back to ``queued``, lease released, when RQ will retry the job.

Each commits its own change; the failure paths never raise over the error that brought them there.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from lineage_core.export import lease
from lineage_core.export.failures import ExportError
from lineage_core.infra.db import rowcount
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus, utcnow
from lineage_core.schedule.rules import refresh_next_export
from lineage_core.setup.destination import Destination

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimedRun:
    """A run this worker now owns, with its connector's destination read once."""

    run_id: int
    connector_id: int
    organization_id: int
    started_at: datetime  # the snapshot time: every event's eventTime
    destination: Destination
    owner: str  # this attempt's lease token
    # What an earlier attempt's Complete step was about to put in place, when it could not record the
    # outcome (lineage_core.export.recovery finds out); None otherwise.
    completing: lease.Completing | None = None


@dataclass(frozen=True)
class ExportResult:
    """A succeeded export, as recorded on its run and returned as the RQ job's result."""

    run_id: int
    events: int
    bytes: int
    etag: str
    version_id: str | None
    trimmed: int  # events written with less detail to stay under 300 KB
    omitted: int  # jobs left out because even their table-level event exceeds 300 KB
    # The object's full-object CRC64NVME (base64), as S3 verified it; None only when an earlier
    # attempt's file, recorded before checksums were kept, was recovered.
    checksum_crc64nvme: str | None = None
    tagging_error: str | None = None  # why the object has no event-count tag; None when it has

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "events": self.events,
            "bytes": self.bytes,
            "etag": self.etag,
            "version_id": self.version_id,
            "trimmed": self.trimmed,
            "omitted": self.omitted,
            "checksum_crc64nvme": self.checksum_crc64nvme,
            "tagging_error": self.tagging_error,
        }


def claim(session: Session, run_id: int, owner: str | None = None) -> ClaimedRun | None:
    """Mark the run ``running`` under a lease held by ``owner`` (atomically) and read its connector.

    Takes a ``queued`` run, or a ``running`` one whose lease expired (its attempt is gone). A running
    run whose lease is live is waited for, for at most one lease: an RQ retry can start while the lease
    of the attempt it retries has not expired yet; a live attempt renews it and keeps its run.

    Returns:
        The claimed run, or None when there is nothing to do (the run is closed, gone, or held by a
        live attempt).

    Raises:
        ExportError: the connector is paused or not set up; the run is closed failed saying so.
        sqlalchemy.exc.SQLAlchemyError: the database did not answer.
    """
    owner = owner or lease.new_owner()
    deadline = time.monotonic() + lease.LEASE_SECONDS + lease.RENEW_SECONDS
    while True:
        started_at = utcnow()
        claimed = session.execute(
            update(ExportRun)
            .where(
                ExportRun.id == run_id,
                or_(
                    ExportRun.status == RunStatus.QUEUED,
                    (ExportRun.status == RunStatus.RUNNING)
                    & or_(ExportRun.lease_expires_at.is_(None), ExportRun.lease_expires_at < started_at),
                ),
            )
            .values(
                status=RunStatus.RUNNING,
                started_at=started_at,
                lease_owner=owner,
                lease_expires_at=lease.lease_until(),
            )
            .returning(ExportRun.connector_id, ExportRun.completing)
        ).one_or_none()
        if claimed is not None:
            break
        session.rollback()
        current = session.get(ExportRun, run_id)
        held = current is not None and current.status is RunStatus.RUNNING
        if not held or time.monotonic() >= deadline:
            logger.info(
                "export run %s is %s: nothing to do",
                run_id,
                "held by a live attempt" if held else (current.status.value if current else "gone"),
            )
            return None
        assert current is not None and current.lease_expires_at is not None
        wait = (current.lease_expires_at - utcnow()).total_seconds() + 0.5
        session.rollback()
        time.sleep(min(max(wait, 0.5), lease.RENEW_SECONDS))
    connector_id, completing = claimed
    connector = session.get(Connector, connector_id)
    assert connector is not None  # the run's foreign key cascades: a run without connector is gone
    session.commit()
    problem = _not_exportable(connector)
    if problem is not None:
        close_failed(session, run_id, connector.id, problem, owner)
        raise ExportError(problem)
    assert connector.bucket and connector.account_id and connector.role_arn  # checked just above
    return ClaimedRun(
        run_id=run_id,
        connector_id=connector.id,
        organization_id=connector.organization_id,
        started_at=started_at,
        destination=Destination(
            bucket=connector.bucket,
            prefix=connector.prefix,
            account_id=connector.account_id,
            role_arn=connector.role_arn,
            external_id=connector.external_id,
            kms_key_arn=connector.kms_key_arn,
            region=connector.bucket_region,
        ),
        owner=owner,
        completing=lease.Completing.from_json(completing) if completing else None,
    )


def _not_exportable(connector: Connector) -> str | None:
    if connector.status is ConnectorStatus.PAUSED:
        return "The connection is paused, so the export did not run. Resume it to export again."
    if connector.status is not ConnectorStatus.ACTIVE or not (
        connector.bucket and connector.account_id and connector.role_arn
    ):
        return (
            "The connection is not set up yet, so the export did not run. "
            "Finish the setup and click Save: the first export starts then."
        )
    return None


def _held_by(run_id: int, owner: str) -> Any:
    return (
        (ExportRun.id == run_id) & (ExportRun.status == RunStatus.RUNNING) & (ExportRun.lease_owner == owner)
    )


_RELEASED: dict[str, Any] = {"lease_owner": None, "lease_expires_at": None, "completing": None}


def close_failed(session: Session, run_id: int, connector_id: int, message: str, owner: str) -> None:
    """Record the failure, unless the run is not this attempt's any more.

    Never raises over the caller's error.
    """
    try:
        session.rollback()
        closed = rowcount(
            session.execute(
                update(ExportRun)
                .where(_held_by(run_id, owner))
                .values(status=RunStatus.FAILED, finished_at=utcnow(), error=message, **_RELEASED)
            )
        )
        if not closed:
            logger.warning("export run %s was closed or taken over; its failure is not recorded", run_id)
        _refresh_schedule(session, connector_id)
        session.commit()
    except SQLAlchemyError as db_error:
        # The run stays "running" until its lease expires: RQ's retry takes it over, or the tick closes it.
        session.rollback()
        logger.error("could not record the failure of export run %s: %s", run_id, type(db_error).__name__)


def requeue_for_retry(session: Session, run_id: int, message: str, owner: str) -> None:
    """Put the run back to ``queued`` for RQ's retry, noting why. Never raises over the caller's error."""
    try:
        session.rollback()
        session.execute(
            update(ExportRun)
            .where(_held_by(run_id, owner))
            .values(status=RunStatus.QUEUED, started_at=None, error=f"Retrying after: {message}", **_RELEASED)
        )
        session.commit()
    except SQLAlchemyError as db_error:
        # RQ's retry takes the run over once its lease expires (claim), so nothing is lost.
        session.rollback()
        logger.error("could not requeue export run %s: %s", run_id, type(db_error).__name__)


# Recording a success is retried this many times, this far apart, before the attempt gives up and
# leaves the outcome to the next attempt (which finds it out from S3: lineage_core.export.recovery).
RECORD_ATTEMPTS = 4
RECORD_BACKOFF_SECONDS = 2.0


def close_succeeded(session: Session, connector_id: int, result: ExportResult, owner: str) -> None:
    """Record the success (the new file is in place whatever happens here).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database did not answer, several times over a few seconds.
    """
    for attempt in range(RECORD_ATTEMPTS):
        try:
            session.rollback()
            closed = rowcount(
                session.execute(
                    update(ExportRun)
                    .where(_held_by(result.run_id, owner))
                    .values(
                        status=RunStatus.SUCCEEDED,
                        finished_at=utcnow(),
                        events=result.events,
                        bytes=result.bytes,
                        etag=result.etag,
                        version_id=result.version_id,
                        trimmed=result.trimmed,
                        omitted=result.omitted,
                        checksum_crc64nvme=result.checksum_crc64nvme,
                        tagging_error=result.tagging_error,
                        error=None,
                        **_RELEASED,
                    )
                )
            )
            if not closed:
                logger.warning(
                    "export run %s was closed or taken over while it ran; the new file is in place",
                    result.run_id,
                )
            _refresh_schedule(session, connector_id)
            session.commit()
            return
        except SQLAlchemyError as db_error:
            session.rollback()
            logger.warning(
                "could not record the success of export run %s (%s)", result.run_id, type(db_error).__name__
            )
            if attempt + 1 == RECORD_ATTEMPTS:
                raise
            time.sleep(RECORD_BACKOFF_SECONDS * (attempt + 1))


def _refresh_schedule(session: Session, connector_id: int) -> None:
    connector = session.get(Connector, connector_id)
    if connector is not None:
        session.refresh(connector)
        refresh_next_export(session, connector)
