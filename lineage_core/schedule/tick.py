"""The scheduler's tick: repair in-flight runs from the database's point of view, then enqueue what is due.

The database is the source of truth and Redis only holds queues, so each tick first re-derives what
Redis should hold: a run still ``queued`` whose job Redis no longer has (Redis flushed, restarted, or
down when the run was requested), or whose job ended without running it, gets its job back.

A ``running`` run is judged by its lease (:mod:`lineage_core.export.lease`), never by Redis alone: while
the lease is live its worker is alive, whatever Redis remembers. Once the lease has expired, and no
further attempt is on its way in Redis (RQ's retry, scheduled or started), the run is closed as failed
(its worker was killed), which schedules the retry for the next nightly run; a run whose last attempt
had reached its Complete step goes back to ``queued`` instead, so that an attempt finds out from S3
whether the new file is in place. A run past the job timeout with an expired lease is closed too.

Then every active connector whose ``next_export_at`` has come gets an export, through the same
:func:`request_export` that Save and "Export now" use, and the tick records its time in the database
(:mod:`lineage_core.ops.heartbeats`) so that a tick that stops coming is seen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from redis.exceptions import RedisError
from rq import Queue
from rq.job import Job, JobStatus
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lineage_core.export.failures import INTERRUPTED_MESSAGE
from lineage_core.export.queue import (
    EXPORT_JOB_TIMEOUT_SECONDS,
    enqueue_runs,
    export_job_id,
    redis_connection,
    request_exports,
)
from lineage_core.infra.config import Settings
from lineage_core.infra.db import rowcount, session_factory
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus, utcnow
from lineage_core.ops.heartbeats import TICK, record_beat
from lineage_core.schedule.rules import refresh_next_export

log = logging.getLogger(__name__)

# How long a job may go unseen by RQ before we believe it is lost rather than just starting.
_GRACE = timedelta(minutes=2)
_BATCH = 500
# A job in one of these states will still run (or runs): its run is left to it.
_COMING = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED}


@dataclass
class TickReport:
    enqueued: int = 0
    already_in_flight: int = 0
    requeued: int = 0
    closed: int = 0
    left_to_lease: int = 0  # running runs left alone because their lease is live (Redis may not know them)


def run_tick(settings: Settings, now: datetime | None = None, limit: int = 10_000) -> TickReport:
    """One pass of the schedule. Safe to run concurrently with itself: the database dedupes."""
    now = now or utcnow()
    report = TickReport()
    session = session_factory(settings.database_url)()
    try:
        _reconcile_in_flight(session, settings, now, report)
        due_ids = session.scalars(
            select(Connector.id)
            .where(Connector.status == ConnectorStatus.ACTIVE, Connector.next_export_at <= now)
            .order_by(Connector.next_export_at)
            .limit(limit)
        ).all()
        for start in range(0, len(due_ids), _BATCH):
            batch = due_ids[start : start + _BATCH]
            created = request_exports(session, settings, batch, "schedule")
            report.enqueued += len(created)
            report.already_in_flight += len(batch) - len(created)
        record_beat(session, TICK, detail=str(report))
    finally:
        session.close()
    log.info("tick: %s", report)
    return report


def _reconcile_in_flight(session: Session, settings: Settings, now: datetime, report: TickReport) -> None:
    runs = session.scalars(
        select(ExportRun).where(ExportRun.status.in_([RunStatus.QUEUED, RunStatus.RUNNING]))
    ).all()
    if not runs:
        return
    try:
        connection = redis_connection(settings)
        # RQ's own check for executions whose worker stopped heartbeating (a killed worker): it marks
        # their jobs failed, or schedules RQ's retry, so that their status below tells the truth.
        Queue(settings.export_queue, connection=connection).started_job_registry.cleanup()
        jobs = Job.fetch_many([run.job_id or export_job_id(run.id) for run in runs], connection=connection)
    except RedisError:
        log.warning("tick: Redis unreachable; in-flight runs left as they are")
        return
    lost_queued = []
    for run, job in zip(runs, jobs, strict=True):
        status = _job_status(job)
        if run.status is RunStatus.QUEUED:
            if status not in _COMING and run.queued_at < now - _GRACE:
                lost_queued.append(run.id)
            continue
        started = run.started_at or run.queued_at
        # A run claimed before leases existed has none: it counts as expired after the grace period.
        lease_end = run.lease_expires_at or started + _GRACE
        expired = lease_end < now
        if not expired:
            report.left_to_lease += 1
            continue
        overdue = started < now - timedelta(seconds=EXPORT_JOB_TIMEOUT_SECONDS) - _GRACE
        if status in _COMING and not overdue:
            continue  # RQ's retry (or a takeover) is on its way: it claims the run once the lease expired
        ended = _closed_or_requeued(session, run, now)
        if ended is RunStatus.QUEUED:
            lost_queued.append(run.id)
        elif ended is RunStatus.FAILED:
            report.closed += 1
    try:
        enqueue_runs(settings, lost_queued, connection)
        report.requeued += len(lost_queued)
    except RedisError:
        log.warning("tick: could not re-enqueue %d queued runs", len(lost_queued))


def _closed_or_requeued(session: Session, run: ExportRun, now: datetime) -> RunStatus | None:
    """End a running run whose lease expired, unless its attempt renewed it meanwhile. Commits.

    Returns the run's new status (``failed``, or ``queued`` when it must be tried again), or None.
    """
    values: dict[str, object]
    new_status = RunStatus.QUEUED if run.completing else RunStatus.FAILED
    if run.completing:
        # Its last attempt sent (or was about to send) its Complete: an attempt must find out from S3.
        values = {"status": RunStatus.QUEUED, "started_at": None, "queued_at": now}
    else:
        values = {"status": RunStatus.FAILED, "finished_at": now, "error": INTERRUPTED_MESSAGE}
    result = session.execute(
        update(ExportRun)
        .where(
            ExportRun.id == run.id,
            ExportRun.status == RunStatus.RUNNING,
            ExportRun.lease_owner.is_not_distinct_from(run.lease_owner),
            ExportRun.lease_expires_at.is_not_distinct_from(run.lease_expires_at),
        )
        .values(lease_owner=None, lease_expires_at=None, **values)
        .execution_options(synchronize_session=False)
    )
    changed = rowcount(result)
    if changed:
        session.refresh(run)  # the schedule below reads the run back through this session
    if changed and new_status is RunStatus.FAILED:
        connector = session.get(Connector, run.connector_id)
        if connector is not None:
            refresh_next_export(session, connector)
    session.commit()
    return new_status if changed else None


def _job_status(job: Job | None) -> JobStatus | None:
    if job is None:
        return None
    try:
        return job.get_status(refresh=False)
    except Exception:  # a job hash half-written or from another RQ version: treat as unknown
        return None
