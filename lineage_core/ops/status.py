"""Operator views of the whole service: every connector's export health, queue and worker health."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker
from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ExportRun, Organization, RunStatus, utcnow


@dataclass(frozen=True)
class ConnectorHealth:
    connector_id: int
    organization: str
    bucket: str | None
    prefix: str
    status: str
    last_status: str | None
    last_finished_at: datetime | None
    last_success_at: datetime | None
    consecutive_failures: int
    next_export_at: datetime | None


@dataclass(frozen=True)
class QueueHealth:
    name: str
    queued: int
    started: int
    failed: int
    scheduled: int


@dataclass(frozen=True)
class WorkerHealth:
    name: str
    state: str
    queues: str
    last_heartbeat: datetime | None
    current_job: str | None


def connector_health(session: Session, limit: int = 500, offset: int = 0) -> list[ConnectorHealth]:
    """One row per connector, worst first (most consecutive failures), in three grouped queries."""
    last_success = (
        select(ExportRun.connector_id, func.max(ExportRun.finished_at).label("at"))
        .where(ExportRun.status == RunStatus.SUCCEEDED)
        .group_by(ExportRun.connector_id)
        .subquery()
    )
    failures = (
        select(ExportRun.connector_id, func.count().label("n"))
        .join(last_success, last_success.c.connector_id == ExportRun.connector_id, isouter=True)
        .where(
            ExportRun.status == RunStatus.FAILED,
            or_(last_success.c.at.is_(None), ExportRun.finished_at > last_success.c.at),
        )
        .group_by(ExportRun.connector_id)
        .subquery()
    )
    last_finished = (
        select(ExportRun.connector_id, func.max(ExportRun.finished_at).label("at"))
        .where(ExportRun.status.in_([RunStatus.SUCCEEDED, RunStatus.FAILED]))
        .group_by(ExportRun.connector_id)
        .subquery()
    )
    last_run = (
        select(ExportRun.connector_id, ExportRun.status, ExportRun.finished_at)
        .join(
            last_finished,
            and_(
                last_finished.c.connector_id == ExportRun.connector_id,
                last_finished.c.at == ExportRun.finished_at,
            ),
        )
        .subquery()
    )
    failure_count = func.coalesce(failures.c.n, 0)
    rows = session.execute(
        select(
            Connector.id,
            Organization.slug,
            Connector.bucket,
            Connector.prefix,
            Connector.status,
            last_run.c.status,
            last_run.c.finished_at,
            last_success.c.at,
            failure_count,
            Connector.next_export_at,
        )
        .join(Organization, Organization.id == Connector.organization_id)
        .join(last_success, last_success.c.connector_id == Connector.id, isouter=True)
        .join(failures, failures.c.connector_id == Connector.id, isouter=True)
        .join(last_run, last_run.c.connector_id == Connector.id, isouter=True)
        .order_by(failure_count.desc(), Organization.slug, Connector.id)
        .limit(limit)
        .offset(offset)
    ).all()
    return [
        ConnectorHealth(
            connector_id=row[0],
            organization=row[1],
            bucket=row[2],
            prefix=row[3],
            status=row[4].value,
            last_status=row[5].value if row[5] is not None else None,
            last_finished_at=row[6],
            last_success_at=row[7],
            consecutive_failures=int(row[8]),
            next_export_at=row[9],
        )
        for row in rows
    ]


def queue_health(settings: Settings, connection: Redis) -> list[QueueHealth]:
    result = []
    for name in (settings.schedule_queue, settings.derive_queue, settings.export_queue):
        queue = Queue(name, connection=connection)
        result.append(
            QueueHealth(
                name=name,
                queued=queue.count,
                started=queue.started_job_registry.count,
                failed=queue.failed_job_registry.count,
                scheduled=queue.scheduled_job_registry.count,
            )
        )
    return result


def worker_health(connection: Redis) -> list[WorkerHealth]:
    workers = []
    for worker in Worker.all(connection=connection):
        job = worker.get_current_job_id()
        workers.append(
            WorkerHealth(
                name=worker.name,
                state=str(worker.get_state()),
                queues=", ".join(worker.queue_names()),
                last_heartbeat=worker.last_heartbeat,
                current_job=job,
            )
        )
    return workers


def redis_ok(connection: Redis) -> bool:
    try:
        return bool(connection.ping())
    except RedisError:
        return False


def stale(moment: datetime | None, seconds: int) -> bool:
    return moment is None or moment < utcnow() - timedelta(seconds=seconds)
