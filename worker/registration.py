"""The worker's presence, kept up whatever Redis forgets.

RQ keeps a worker's record (``rq:worker:<name>``) and its membership of ``rq:workers`` in Redis only,
written at birth. After a flush or a restart without persistence both are gone; RQ's heartbeat then
writes a bare ``last_heartbeat`` field and the worker is listed nowhere, so dashboards and the health
check call it dead while it works. :class:`ExportWorker` checks at each heartbeat that Redis still lists
it, and registers again when not (a few round trips, at most once per heartbeat).

Each heartbeat is also written to a small local file (:func:`heartbeat_dir`), outside Redis, so that
``python -m worker.healthcheck`` tells "Redis forgot me" (file fresh, process alive) from "I am dead".
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError
from rq import Worker, worker_registration

# An idle worker blocks on its queues for WORKER_TTL - 15 seconds between heartbeats (RQ's rule), so a
# flushed Redis lists it again within that. RQ's default (420 s) would leave it unlisted for 7 minutes.
WORKER_TTL = 60
# RQ's own maintenance (dead workers' jobs, and restarting RQ's scheduler of delayed retries if it died
# with Redis): every minute instead of every 10.
MAINTENANCE_INTERVAL = 60
LOCAL_HEARTBEAT_EVERY = 5.0  # seconds between two writes of the local file


def heartbeat_dir() -> Path:
    """Where this host's workers write their local heartbeats (the temp directory, per user)."""
    return Path(tempfile.gettempdir()) / f"openlineage-export-workers-{os.getuid()}"


@dataclass(frozen=True)
class LocalHeartbeat:
    pid: int
    name: str
    at: datetime
    state: str
    redis: str  # which Redis it works for (host:port/db)
    queues: tuple[str, ...]
    alive: bool  # the process still exists


def redis_identity(connection: Any) -> str:
    """host:port/db of a Redis client: which Redis (and database) a worker works for."""
    kwargs = connection.connection_pool.connection_kwargs
    return f"{kwargs.get('host', kwargs.get('path', '?'))}:{kwargs.get('port', '')}/{kwargs.get('db', 0)}"


def local_heartbeats(directory: Path | None = None) -> list[LocalHeartbeat]:
    """The local heartbeat files of this host's workers, newest first (unreadable ones are skipped)."""
    directory = directory or heartbeat_dir()
    found = []
    for path in directory.glob("worker-*.json"):
        try:
            data = json.loads(path.read_text())
            pid = int(data["pid"])
            beat = LocalHeartbeat(
                pid=pid,
                name=str(data["name"]),
                at=datetime.fromisoformat(data["at"]),
                state=str(data["state"]),
                redis=str(data["redis"]),
                queues=tuple(data["queues"]),
                alive=_alive(pid),
            )
        except (OSError, ValueError, KeyError):
            continue
        found.append(beat)
    return sorted(found, key=lambda beat: beat.at, reverse=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ExportWorker(Worker):
    """RQ's forking worker, registering itself again when Redis forgot it, with a local heartbeat file."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("worker_ttl", WORKER_TTL)
        kwargs.setdefault("maintenance_interval", MAINTENANCE_INTERVAL)
        super().__init__(*args, **kwargs)
        self._local_written = 0.0
        self._worker_pid = os.getpid()
        self._local_path = heartbeat_dir() / f"worker-{self._worker_pid}.json"

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        # First the local file: it must be written even when Redis does not answer.
        self._write_local_heartbeat()
        super().heartbeat(timeout, pipeline)
        if pipeline is None:
            self.ensure_registered()

    def maintain_heartbeats(self, job: Any, execution: Any) -> None:
        """While a job runs (every 30 s). Redis being away must not end the worker, nor its job."""
        self._write_local_heartbeat(force=True)
        try:
            super().maintain_heartbeats(job, execution)
            self.ensure_registered()
        except RedisError as error:
            self.log.warning(
                "Worker %s: Redis unreachable while job %s runs (%s); the job goes on",
                self.name,
                job.id,
                type(error).__name__,
            )

    def ensure_registered(self) -> bool:
        """Register again if Redis does not list this worker (flushed or restarted); True if it did."""
        with self.connection.pipeline() as pipeline:
            pipeline.sismember(self.redis_workers_keys, self.key)
            pipeline.hexists(self.key, "birth")
            listed, born = pipeline.execute()
        if listed and born:
            return False
        self.log.warning(
            "Worker %s: Redis no longer listed it (flushed or restarted); registering again", self.name
        )
        if self.last_heartbeat is None:
            return False
        with self.connection.pipeline() as pipeline:
            pipeline.hset(self.key, mapping=self.serialize())
            pipeline.hset(self.key, "state", self.get_state())
            worker_registration.register(self, pipeline)
            pipeline.expire(self.key, self.worker_ttl + 60)
            pipeline.execute()
        return True

    def register_death(self) -> None:
        self._local_path.unlink(missing_ok=True)
        super().register_death()  # type: ignore[no-untyped-call]

    def _write_local_heartbeat(self, *, force: bool = False) -> None:
        if self.is_horse or os.getpid() != self._worker_pid:
            return  # the work-horse (a fork) is not the worker
        moment = time.monotonic()
        if not force and moment - self._local_written < LOCAL_HEARTBEAT_EVERY:
            return
        self._local_written = moment
        data = {
            "pid": os.getpid(),
            "name": self.name,
            "hostname": socket.gethostname(),
            "at": datetime.now(UTC).isoformat(),
            "state": self.get_state(),
            "redis": redis_identity(self.connection),
            "queues": self.queue_names(),
        }
        try:
            self._local_path.parent.mkdir(mode=0o700, exist_ok=True)
            partial = self._local_path.with_suffix(".tmp")
            partial.write_text(json.dumps(data))
            partial.replace(self._local_path)
        except OSError as error:
            self.log.warning("Worker %s: could not write its local heartbeat: %s", self.name, error)


def fresh(beat: LocalHeartbeat, now: datetime, window: timedelta) -> bool:
    return beat.alive and now - beat.at < window
