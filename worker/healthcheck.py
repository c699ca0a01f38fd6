"""``python -m worker.healthcheck``: exit 0 when this host's export worker is healthy, 1 otherwise.

Healthy means: a worker on this host listening to the export queue is busy, or sent a heartbeat
recently, or there is nothing for it to do. For container health checks and process supervisors.
"""

from __future__ import annotations

import socket
import sys
from datetime import UTC, datetime, timedelta

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.worker import WorkerStatus

from lineage_core.infra.config import ConfigError, Settings

HEARTBEAT_WINDOW = timedelta(minutes=3)


def check(settings: Settings, connection: Redis, hostname: str, now: datetime) -> tuple[bool, str]:
    workers = [
        w
        for w in Worker.all(connection=connection)
        if w.hostname == hostname and settings.export_queue in w.queue_names()
    ]
    if not workers:
        return False, f"no worker on {hostname} listens to {settings.export_queue}"
    for worker in workers:
        if worker.get_state() == WorkerStatus.BUSY:
            return True, f"{worker.name} is busy"
        heartbeat = worker.last_heartbeat
        if heartbeat is not None:
            heartbeat = heartbeat if heartbeat.tzinfo else heartbeat.replace(tzinfo=UTC)
            if now - heartbeat < HEARTBEAT_WINDOW:
                return True, f"{worker.name} sent a heartbeat at {heartbeat:%H:%M:%S}"
    waiting = Queue(settings.export_queue, connection=connection).count
    if waiting == 0:
        return True, "nothing to do"
    return False, f"{waiting} jobs wait and no worker on {hostname} is busy or alive"


def main() -> int:
    try:
        settings = Settings.from_env()
    except ConfigError as error:
        print(f"healthcheck: {error}", file=sys.stderr)
        return 2
    try:
        healthy, reason = check(
            settings, Redis.from_url(settings.redis_url), socket.gethostname(), datetime.now(UTC)
        )
    except RedisError as error:
        print(f"unhealthy: Redis unreachable ({type(error).__name__})")
        return 1
    print(("healthy: " if healthy else "unhealthy: ") + reason)
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
