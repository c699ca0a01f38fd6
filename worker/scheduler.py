"""``python -m worker.scheduler``: the Procfile's scheduler process (rq-scheduler, in our own loop).

Reconciles the periodic jobs of :mod:`worker.periodic_jobs` at start, then moves them onto the schedule
queue as they come due. Several may run: as in rq-scheduler, each loop enqueues only while holding
``rq:scheduler_lock``, so one enqueues at a time and a second process is a hot standby.

rq-scheduler's own ``Scheduler.run()`` registers the periodic jobs nowhere but at start and exits on
the first Redis ``ConnectionError``; Redis, though, is where the schedule lives and where it gets lost
(a flush, a restart without persistence). :meth:`ResilientScheduler.loop` is the same loop (heartbeat,
lock, enqueue, unlock, sleep) except that:

* under the lock, every loop schedules again the periodic jobs Redis no longer holds (due at once, so
  the tick that follows a flush also puts back the export jobs Redis lost);
* a Redis error never ends the process: it backs off (1 s doubling to 30 s), reconnects and goes on;
* a scheduler record (``rq:scheduler_instance:<name>``) that vanished is written again.
"""

from __future__ import annotations

import logging
import signal
import time
from contextlib import suppress
from types import FrameType

from redis.exceptions import RedisError
from rq_scheduler import Scheduler

from lineage_core.export.queue import redis_connection
from lineage_core.infra.process import start_process
from worker.periodic_jobs import PERIODIC_JOBS, PeriodicJob, reconcile, restore_missing

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 30  # how often due periodic jobs are moved to the queue
MAX_BACKOFF_SECONDS = 30.0


class ResilientScheduler(Scheduler):  # type: ignore[misc]
    """rq-scheduler's Scheduler, run by :meth:`loop`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._stop_requested = False

    def announce(self) -> None:
        """Write this scheduler's record (rq-scheduler's ``register_birth``, minus its refusal to
        overwrite a live record: after a reconnect the live record is this process's own)."""
        with self.connection.pipeline() as pipeline:
            pipeline.delete(self.key)
            pipeline.hset(self.key, "birth", time.time())
            pipeline.expire(self.key, int(self._interval) + 10)
            pipeline.execute()

    def run_once(self, jobs: tuple[PeriodicJob, ...] = PERIODIC_JOBS) -> list[str]:
        """One loop: heartbeat, and under the lock restore missing periodic jobs and enqueue due ones.
        Returns the periodic job ids restored. Raises RedisError when Redis does not answer."""
        if not self.connection.expire(self.key, int(self._interval) + 10):
            self.announce()  # the record is gone: Redis was flushed or restarted
        restored: list[str] = []
        if self.acquire_lock():
            try:
                restored = restore_missing(self, self.queue_name, jobs)
                if restored:
                    log.warning(
                        "periodic jobs missing from Redis (flushed or restarted?); restored %s", restored
                    )
                self.enqueue_jobs()
                self.heartbeat()
            finally:
                self.remove_lock()
        else:
            log.debug("another scheduler holds the lock; standing by")
        return restored

    def loop(self, jobs: tuple[PeriodicJob, ...] = PERIODIC_JOBS) -> None:
        """Run until SIGTERM/SIGINT, surviving Redis being away."""
        self._install_stop_handlers()
        backoff = 1.0
        try:
            with suppress(RedisError):
                self.announce()
            while not self._stop_requested:
                started = time.monotonic()
                try:
                    self.run_once(jobs)
                except RedisError as error:
                    self._lock_acquired = False  # whatever it held expires by itself
                    log.warning(
                        "Redis unreachable (%s); trying again in %.0f s", type(error).__name__, backoff
                    )
                    time.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                    continue
                backoff = 1.0
                time.sleep(max(self._interval - (time.monotonic() - started), 0))
        finally:
            with suppress(RedisError):
                self.remove_lock()
                self.register_death()

    def _install_stop_handlers(self) -> None:
        def stop(_signum: int, _frame: FrameType | None) -> None:
            log.info("shutting down the scheduler")
            self._stop_requested = True
            raise SystemExit(0)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)


def main() -> int:
    settings = start_process("scheduler")
    connection = redis_connection(settings)
    scheduler = ResilientScheduler(
        queue_name=settings.schedule_queue, connection=connection, interval=INTERVAL_SECONDS
    )
    try:
        changes = reconcile(scheduler, settings.schedule_queue)
        log.info("periodic jobs reconciled: %s", changes)
    except RedisError as error:
        log.warning(
            "Redis unreachable at start (%s); the loop registers the periodic jobs", type(error).__name__
        )
    scheduler.loop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
