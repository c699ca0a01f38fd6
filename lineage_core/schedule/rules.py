"""When a connector's next export is due (spec: "When exports run").

The rules, all in UTC:
- The first export starts as soon as the connector is saved (activated).
- After a successful export, the next one is due once the Export Interval has passed since that
  export's snapshot time (the start of the successful run, so exports don't drift later each time).
- After a failed export, the next attempt is the next day's nightly run, rather than the next
  interval: the first ``NIGHTLY_RUN_UTC`` on a later calendar day than the failure.
- Nothing is due while an export of the connector is queued or running, or while it is paused or
  not yet active.

:func:`next_export_at` is a pure function of the stored state; :func:`refresh_next_export` stores its
answer on the connector, so the scheduler's tick reads only the rows that are due.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus

NIGHTLY_RUN_UTC = time(2, 0, tzinfo=UTC)


@dataclass(frozen=True)
class ScheduleState:
    """What the schedule depends on, read from the connector and its runs."""

    status: ConnectorStatus
    interval_days: int
    activated_at: datetime | None
    last_success_started_at: datetime | None
    last_attempt_finished_at: datetime | None
    last_attempt_failed: bool
    in_flight: bool


def next_nightly_run_after(moment: datetime) -> datetime:
    """The nightly run on the calendar day (UTC) after ``moment``."""
    day = moment.astimezone(UTC).date() + timedelta(days=1)
    return datetime.combine(day, NIGHTLY_RUN_UTC)


def next_export_at(state: ScheduleState) -> datetime | None:
    """When the next export is due, or None when none should be scheduled."""
    if state.status is not ConnectorStatus.ACTIVE or state.in_flight:
        return None
    if state.last_attempt_finished_at is None:
        # Never exported: due from activation on (Save normally queues it at once).
        return state.activated_at or datetime.min.replace(tzinfo=UTC)
    if state.last_attempt_failed:
        return next_nightly_run_after(state.last_attempt_finished_at)
    if state.last_success_started_at is None:  # a succeeded run always has a start; be defensive
        return state.last_attempt_finished_at
    return state.last_success_started_at + timedelta(days=state.interval_days)


def is_due(state: ScheduleState, now: datetime) -> bool:
    due = next_export_at(state)
    return due is not None and due <= now


def schedule_state(session: Session, connector: Connector) -> ScheduleState:
    """Read the connector's schedule inputs from its runs (three indexed lookups)."""
    in_flight = (
        session.scalar(
            select(ExportRun.id)
            .where(
                ExportRun.connector_id == connector.id,
                ExportRun.status.in_([RunStatus.QUEUED, RunStatus.RUNNING]),
            )
            .limit(1)
        )
        is not None
    )
    last_finished = session.scalar(
        select(ExportRun)
        .where(
            ExportRun.connector_id == connector.id,
            ExportRun.status.in_([RunStatus.SUCCEEDED, RunStatus.FAILED]),
        )
        .order_by(ExportRun.finished_at.desc(), ExportRun.id.desc())
        .limit(1)
    )
    last_success_started = session.scalar(
        select(ExportRun.started_at)
        .where(ExportRun.connector_id == connector.id, ExportRun.status == RunStatus.SUCCEEDED)
        .order_by(ExportRun.started_at.desc())
        .limit(1)
    )
    return ScheduleState(
        status=connector.status,
        interval_days=connector.interval_days,
        activated_at=connector.verified_at,
        last_success_started_at=last_success_started,
        last_attempt_finished_at=last_finished.finished_at if last_finished else None,
        last_attempt_failed=bool(last_finished and last_finished.status is RunStatus.FAILED),
        in_flight=in_flight,
    )


def refresh_next_export(session: Session, connector: Connector) -> datetime | None:
    """Recompute and store the connector's next export time (the caller commits)."""
    session.flush()
    connector.next_export_at = next_export_at(schedule_state(session, connector))
    return connector.next_export_at
