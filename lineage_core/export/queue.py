"""Requesting exports: a run row in the database first, then a job on the RQ queue.

The database is the source of truth. A run is created ``queued`` before its job is enqueued, and a
partial unique index allows one queued-or-running run per connector, so a connector never has two
exports in flight whoever asks (Save, "Export now", the scheduler's tick, two web processes at once).
If Redis is down or later flushed, the run stays ``queued`` in the database and the scheduler's next
tick puts its job back on the queue. The web process enqueues by dotted path and never imports jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Retry
from sqlalchemy import String, cast, literal, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.logs import job_meta
from lineage_core.infra.models import Connector, ExportRun, RunStatus, utcnow

EXPORT_JOB = "worker.jobs.export_connector"
EXPORT_JOB_TIMEOUT_SECONDS = 2 * 3600
# Transient failures (throttling, S3 5xx, network) are retried by RQ after 1, 5 and 15 minutes before
# the run counts as failed; the worker's job clears the retries for failures only an admin can fix.
EXPORT_RETRY = Retry(max=3, interval=[60, 300, 900])
_IN_FLIGHT = text("status IN ('queued', 'running')")


def export_job_id(run_id: int) -> str:
    return f"export-run-{run_id}"


def redis_connection(settings: Settings) -> Redis:
    return Redis.from_url(settings.redis_url, socket_connect_timeout=5, socket_timeout=30)


def request_export(
    session: Session, settings: Settings, connector: Connector, trigger: str
) -> ExportRun | None:
    """Create a queued run for the connector and enqueue its job. Commits the session.

    Returns the new run, or None when an export of this connector is already queued or running.
    """
    created = request_exports(session, settings, [connector.id], trigger)
    if not created:
        return None
    session.refresh(connector)
    return session.get(ExportRun, created[0])


def request_exports(
    session: Session, settings: Settings, connector_ids: Sequence[int], trigger: str
) -> list[int]:
    """Queue one export for each connector that has none in flight. Commits; returns the new run ids.

    One INSERT … ON CONFLICT DO NOTHING against the partial unique index decides, atomically, which
    connectors get a run; their jobs then go to Redis in one pipeline. If Redis is unreachable the runs
    stay queued in the database and the scheduler's next tick enqueues them.
    """
    if not connector_ids:
        return []
    now = utcnow()
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    source = select(
        Connector.id,
        literal(RunStatus.QUEUED.value),
        literal(trigger),
        literal(now, type_=ExportRun.queued_at.type),
    ).where(Connector.id.in_(connector_ids))
    statement = (
        insert(ExportRun)
        .from_select(["connector_id", "status", "trigger", "queued_at"], source)
        .on_conflict_do_nothing(index_elements=["connector_id"], index_where=_IN_FLIGHT)
        .returning(ExportRun.id, ExportRun.connector_id)
    )
    created = session.execute(statement).all()
    run_ids = [row[0] for row in created]
    if run_ids:
        session.execute(
            update(ExportRun)
            .where(ExportRun.id.in_(run_ids))
            .values(job_id=literal("export-run-", String) + cast(ExportRun.id, String))
            .execution_options(synchronize_session=False)
        )
        # Nothing is due while a run is in flight; the run's end computes the next time.
        session.execute(
            update(Connector)
            .where(Connector.id.in_([row[1] for row in created]))
            .values(next_export_at=None)
            .execution_options(synchronize_session=False)
        )
    session.commit()
    with suppress(RedisError):
        enqueue_runs(settings, run_ids)
    return run_ids


def _job_data(run_id: int) -> object:
    return Queue.prepare_data(
        EXPORT_JOB,
        args=(run_id,),
        job_id=export_job_id(run_id),
        timeout=EXPORT_JOB_TIMEOUT_SECONDS,
        result_ttl=7 * 24 * 3600,
        failure_ttl=30 * 24 * 3600,
        description=f"export run {run_id}",
        retry=EXPORT_RETRY,
        # The web request that asked for the export (Save, Export now): its id is on the job's log lines.
        meta=job_meta(),
    )


def enqueue_runs(settings: Settings, run_ids: Sequence[int], connection: Redis | None = None) -> None:
    """Put the jobs of existing queued runs on the queue, in one Redis pipeline.

    Raises:
        redis.exceptions.RedisError: Redis is unreachable.
    """
    if not run_ids:
        return
    own_connection = connection is None
    connection = connection or redis_connection(settings)
    try:
        queue = Queue(settings.export_queue, connection=connection)
        for start in range(0, len(run_ids), 1000):
            chunk = run_ids[start : start + 1000]
            queue.enqueue_many([_job_data(run_id) for run_id in chunk])  # type: ignore[misc]
    finally:
        if own_connection:
            connection.close()
