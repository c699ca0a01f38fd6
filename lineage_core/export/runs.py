"""An export run's lifecycle in the database: claimed ``queued`` → ``running``, then closed once.

The contract with :mod:`lineage_core.export.queue` (which writes the run ``queued`` before enqueueing
its job) and with the scheduler's tick (which closes runs whose worker died):

* :func:`claim` moves the run from ``queued`` to ``running`` atomically and commits; a run that is not
  ``queued`` any more (closed by the tick, already run, deleted with its connector) is left alone.
* :func:`close_succeeded` and :func:`close_failed` close it only while it is still ``running`` (the
  tick may have closed it meanwhile), and refresh the connector's next export time.
* :func:`requeue_for_retry` puts it back to ``queued`` when RQ will retry the job.

Each commits its own change; the failure paths never raise over the error that brought them there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from lineage_core.export.failures import ExportError
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "events": self.events,
            "bytes": self.bytes,
            "etag": self.etag,
            "version_id": self.version_id,
            "trimmed": self.trimmed,
            "omitted": self.omitted,
        }


def claim(session: Session, run_id: int) -> ClaimedRun | None:
    """Mark the run ``running`` if it is ``queued`` (atomically) and read its connector.

    Returns:
        The claimed run, or None when the run was not ``queued`` (nothing to do).

    Raises:
        ExportError: the connector is paused or not set up; the run is closed failed saying so.
    """
    started_at = utcnow()
    connector_id = session.execute(
        update(ExportRun)
        .where(ExportRun.id == run_id, ExportRun.status == RunStatus.QUEUED)
        .values(status=RunStatus.RUNNING, started_at=started_at)
        .returning(ExportRun.connector_id)
    ).scalar_one_or_none()
    if connector_id is None:
        session.rollback()
        current = session.get(ExportRun, run_id)
        logger.info(
            "export run %s is %s, not queued: nothing to do",
            run_id,
            current.status.value if current else "gone",
        )
        return None
    connector = session.get(Connector, connector_id)
    assert connector is not None  # the run's foreign key cascades: a run without connector is gone
    session.commit()
    problem = _not_exportable(connector)
    if problem is not None:
        close_failed(session, run_id, connector.id, problem)
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


def close_failed(session: Session, run_id: int, connector_id: int, message: str) -> None:
    """Record the failure, unless the run was closed meanwhile. Never raises over the caller's error."""
    try:
        session.rollback()
        closed = _rowcount(
            session.execute(
                update(ExportRun)
                .where(ExportRun.id == run_id, ExportRun.status == RunStatus.RUNNING)
                .values(status=RunStatus.FAILED, finished_at=utcnow(), error=message)
            )
        )
        if not closed:
            logger.warning("export run %s was closed by someone else; its failure is not recorded", run_id)
        _refresh_schedule(session, connector_id)
        session.commit()
    except SQLAlchemyError as db_error:
        # The run stays "running"; the scheduler's tick closes it once the job is seen failed.
        session.rollback()
        logger.error("could not record the failure of export run %s: %s", run_id, type(db_error).__name__)


def requeue_for_retry(session: Session, run_id: int, message: str) -> None:
    """Put the run back to ``queued`` for RQ's retry, noting why. Never raises over the caller's error."""
    try:
        session.rollback()
        session.execute(
            update(ExportRun)
            .where(ExportRun.id == run_id, ExportRun.status == RunStatus.RUNNING)
            .values(status=RunStatus.QUEUED, started_at=None, error=f"Retrying after: {message}")
        )
        session.commit()
    except SQLAlchemyError as db_error:
        session.rollback()
        logger.error("could not requeue export run %s: %s", run_id, type(db_error).__name__)


def close_succeeded(session: Session, connector_id: int, result: ExportResult) -> None:
    """Record the success (the new file is in place whatever happens here)."""
    closed = _rowcount(
        session.execute(
            update(ExportRun)
            .where(ExportRun.id == result.run_id, ExportRun.status == RunStatus.RUNNING)
            .values(
                status=RunStatus.SUCCEEDED,
                finished_at=utcnow(),
                events=result.events,
                bytes=result.bytes,
                etag=result.etag,
                version_id=result.version_id,
                trimmed=result.trimmed,
                omitted=result.omitted,
                upload_id=None,  # completed: nothing pending any more
                error=None,
            )
        )
    )
    if not closed:
        logger.warning(
            "export run %s was closed by someone else while it ran; the new file is in place", result.run_id
        )
    _refresh_schedule(session, connector_id)
    session.commit()


def _refresh_schedule(session: Session, connector_id: int) -> None:
    connector = session.get(Connector, connector_id)
    if connector is not None:
        session.refresh(connector)
        refresh_next_export(session, connector)


def _rowcount(result: Any) -> int:
    """Rows an UPDATE matched (``Session.execute`` is typed as returning a plain ``Result``)."""
    return cast(CursorResult[Any], result).rowcount
