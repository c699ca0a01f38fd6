"""Putting export jobs on the RQ queue. The web process enqueues by dotted path and never imports jobs."""

from __future__ import annotations

from redis import Redis
from rq import Queue
from rq.exceptions import DuplicateJobError

from lineage_core.config import Settings

EXPORT_JOB = "worker.jobs.export_connector"
EXPORT_JOB_TIMEOUT_SECONDS = 2 * 3600


def export_job_id(connector_id: int) -> str:
    """One id per connector, so RQ itself refuses a second queued export of the same connector."""
    return f"export-connector-{connector_id}"


def redis_connection(settings: Settings) -> Redis:
    return Redis.from_url(settings.redis_url)


def enqueue_export(settings: Settings, connector_id: int, trigger: str) -> bool:
    """Queue an export of the connector. False when one is already queued.

    Raises:
        redis.exceptions.RedisError: Redis is unreachable. The connector stays due in the database,
            so the scheduler's next tick enqueues it.
    """
    connection = redis_connection(settings)
    try:
        Queue(settings.export_queue, connection=connection).enqueue(
            EXPORT_JOB,
            connector_id,
            trigger,
            job_id=export_job_id(connector_id),
            unique=True,
            job_timeout=EXPORT_JOB_TIMEOUT_SECONDS,
            result_ttl=7 * 24 * 3600,
            failure_ttl=30 * 24 * 3600,
            description=f"export connector {connector_id} ({trigger})",
        )
    except DuplicateJobError:
        return False
    finally:
        connection.close()
    return True
