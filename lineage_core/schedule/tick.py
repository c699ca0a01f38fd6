"""The scheduler's tick: repair in-flight runs from the database's point of view, then enqueue what is due.

The database is the source of truth and Redis only holds queues, so each tick first re-derives what
Redis should hold: a run still ``queued`` whose job Redis no longer has (Redis flushed, restarted, or
down when the run was requested) gets its job back; a run still ``running`` whose job is gone, has
failed, or has outlived the job timeout (its worker was killed) is closed as failed, which schedules
the retry for the next nightly run. Then every active connector whose ``next_export_at`` has come
gets an export, through the same :func:`request_export` that Save and "Export now" use.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from redis.exceptions import RedisError
from rq import Queue
from rq.job import Job, JobStatus
from sqlalchemy import select
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
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus, utcnow
from lineage_core.schedule.rules import refresh_next_export

log = logging.getLogger(__name__)

# How long a job may go unseen by RQ before we believe it is lost rather than just starting.
_GRACE = timedelta(minutes=2)
_BATCH = 500


@dataclass
class TickReport:
    enqueued: int = 0
    already_in_flight: int = 0
    requeued: int = 0
    closed: int = 0


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
            if job is None and run.queued_at < now - _GRACE:
                lost_queued.append(run.id)
            continue
        started = run.started_at or run.queued_at
        # A running run's job is STARTED while its execution lives; any other state (gone, failed,
        # or queued again by RQ's retry of an abandoned job) means the execution ended without us.
        lost = status is not JobStatus.STARTED and started < now - _GRACE
        overdue = started < now - timedelta(seconds=EXPORT_JOB_TIMEOUT_SECONDS) - _GRACE
        if lost or overdue:
            run.status = RunStatus.FAILED
            run.finished_at = now
            run.error = INTERRUPTED_MESSAGE
            connector = session.get(Connector, run.connector_id)
            if connector is not None:
                refresh_next_export(session, connector)
            session.commit()
            report.closed += 1
    try:
        enqueue_runs(settings, lost_queued, connection)
        report.requeued += len(lost_queued)
    except RedisError:
        log.warning("tick: could not re-enqueue %d queued runs", len(lost_queued))


def _job_status(job: Job | None) -> JobStatus | None:
    if job is None:
        return None
    try:
        return job.get_status(refresh=False)
    except Exception:  # a job hash half-written or from another RQ version: treat as unknown
        return None
