"""Requesting exports: a run row in the database first, then a job on the RQ queue.

The database is the source of truth. A run is created ``queued`` before its job is enqueued, and a
partial unique index allows one queued-or-running run per connector, so a connector never has two
exports in flight whoever asks (Save, "Export now", the scheduler's tick, two web processes at once).
If Redis is down or later flushed, the run stays ``queued`` in the database and the scheduler's next
tick puts its job back on the queue. The web process enqueues by dotted path and never imports jobs.
"""

from __future__ import annotations

from contextlib import suppress

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import DuplicateJobError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lineage_core.config import Settings
from lineage_core.models import Connector, ExportRun, RunStatus, utcnow

EXPORT_JOB = "worker.jobs.export_connector"
EXPORT_JOB_TIMEOUT_SECONDS = 2 * 3600


def export_job_id(run_id: int) -> str:
    return f"export-run-{run_id}"


def redis_connection(settings: Settings) -> Redis:
    return Redis.from_url(settings.redis_url, socket_connect_timeout=5, socket_timeout=30)


def request_export(
    session: Session, settings: Settings, connector: Connector, trigger: str
) -> ExportRun | None:
    """Create a queued run for the connector and enqueue its job. Commits the session.

    Returns the new run, or None when an export of this connector is already queued or running.
    A Redis failure is logged by the caller's tick later: the run stays queued and is re-enqueued.
    """
    run = ExportRun(connector_id=connector.id, status=RunStatus.QUEUED, trigger=trigger, queued_at=utcnow())
    try:
        with session.begin_nested():
            session.add(run)
            session.flush()
    except IntegrityError:
        return None
    run.job_id = export_job_id(run.id)
    connector.next_export_at = None  # nothing is due while a run is in flight
    session.commit()
    # If Redis is unreachable the run stays queued in the database and the next tick enqueues it.
    with suppress(RedisError):
        enqueue_run(settings, run.id)
    return run


def enqueue_run(settings: Settings, run_id: int) -> bool:
    """Put the job of an existing queued run on the queue. False if RQ already holds it.

    Raises:
        redis.exceptions.RedisError: Redis is unreachable.
    """
    connection = redis_connection(settings)
    try:
        Queue(settings.export_queue, connection=connection).enqueue(
            EXPORT_JOB,
            run_id,
            job_id=export_job_id(run_id),
            unique=True,
            job_timeout=EXPORT_JOB_TIMEOUT_SECONDS,
            result_ttl=7 * 24 * 3600,
            failure_ttl=30 * 24 * 3600,
            description=f"export run {run_id}",
        )
    except DuplicateJobError:
        return False
    finally:
        connection.close()
    return True
