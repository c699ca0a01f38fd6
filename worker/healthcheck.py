"""``python -m worker.healthcheck``: exit 0 when this host's export worker is healthy, 1 otherwise.

Healthy means: a worker on this host listening to the export queue is busy, or sent a heartbeat
recently, or there is nothing for it to do. For container health checks and process supervisors.

Redis may have forgotten a live worker (a flush, a restart: it registers again by itself within a
minute), or be unreachable. The worker also writes a heartbeat to a local file
(:mod:`worker.registration`), so the check tells "Redis forgot me" (the process is alive and its file
fresh: healthy, restarting it would not help) from "I am dead" (no live process: unhealthy).
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
from worker.registration import LocalHeartbeat, fresh, local_heartbeats, redis_identity

HEARTBEAT_WINDOW = timedelta(minutes=3)


def _live_local(
    settings: Settings, connection: Redis, now: datetime, local: list[LocalHeartbeat] | None
) -> LocalHeartbeat | None:
    """The newest fresh local heartbeat of a live worker of this Redis and export queue."""
    beats = local_heartbeats() if local is None else local
    redis = redis_identity(connection)
    return next(
        (
            beat
            for beat in beats
            if beat.redis == redis
            and settings.export_queue in beat.queues
            and fresh(beat, now, HEARTBEAT_WINDOW)
        ),
        None,
    )


def check(
    settings: Settings,
    connection: Redis,
    hostname: str,
    now: datetime,
    local: list[LocalHeartbeat] | None = None,
) -> tuple[bool, str]:
    """Whether this host's worker is healthy, and why. ``local``: the local heartbeats (read if None)."""
    workers = [
        w
        for w in Worker.all(connection=connection)
        if w.hostname == hostname and settings.export_queue in w.queue_names()
    ]
    if not workers:
        alive = _live_local(settings, connection, now, local)
        if alive is not None:
            return True, (
                f"Redis does not list worker pid {alive.pid} ({alive.name}), but it is alive: local "
                f"heartbeat at {alive.at:%H:%M:%S}, {alive.state}. Redis was flushed or restarted; "
                "the worker registers again by itself"
            )
        return False, f"no worker on {hostname} listens to {settings.export_queue}, and none is alive here"
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
    connection = Redis.from_url(settings.redis_url, socket_connect_timeout=5, socket_timeout=10)
    try:
        healthy, reason = check(settings, connection, socket.gethostname(), datetime.now(UTC))
    except RedisError as error:
        alive = _live_local(settings, connection, datetime.now(UTC), None)
        if alive is not None:
            print(
                f"healthy: Redis unreachable ({type(error).__name__}); worker pid {alive.pid} is alive "
                f"(local heartbeat at {alive.at:%H:%M:%S}) and reconnects by itself"
            )
            return 0
        print(f"unhealthy: Redis unreachable ({type(error).__name__}) and no worker is alive here")
        return 1
    print(("healthy: " if healthy else "unhealthy: ") + reason)
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
