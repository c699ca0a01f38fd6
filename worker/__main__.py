"""``python -m worker``: an RQ worker on the export queue (the Procfile's worker process)."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue

import worker.jobs  # noqa: F401  (imported here, once, rather than in every job's fork)
from lineage_core.infra.process import prepare_for_jobs, start_process
from worker.registration import ExportWorker

log = logging.getLogger(__name__)

FIRST_PAUSE_SECONDS = 1.0
LONGEST_PAUSE_SECONDS = 30.0


def work_until_stopped(
    make_worker: Callable[[], ExportWorker],
    pause: Callable[[float], object] = time.sleep,
    **work_options: Any,
) -> None:
    """Run a worker; when Redis goes away under it, wait and run a new one, until it stops by itself.

    RQ retries a lost connection while it waits for a job, but not everywhere in its loop: Redis gone
    between two jobs (checking for suspension, or recording the job that just ended) ends ``work()``,
    and its teardown then fails on Redis too. That ended the process; a worker must outlive an outage
    (README, "When something fails"), so it starts again here, with a backoff. No job is lost: the
    loop only ends between jobs, and a job Redis lost the record of is re-enqueued by the tick.
    """
    wait = FIRST_PAUSE_SECONDS
    while True:
        try:
            make_worker().work(**work_options)
            return
        except RedisError as error:
            log.warning(
                "Redis unreachable (%s: %s); the worker starts again in %.0f s",
                type(error).__name__,
                error,
                wait,
            )
            # The ended worker's signal handlers only set a flag its loop no longer reads: between two
            # workers, SIGTERM and SIGINT stop the process at once, as a process manager expects.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            pause(wait)
            wait = min(wait * 2, LONGEST_PAUSE_SECONDS)


def main() -> int:
    settings = start_process("worker")
    connection = Redis.from_url(settings.redis_url)
    prepare_for_jobs(settings)  # once here rather than in each job's fork
    # The schedule's tick first: it is short, and exports wait on it. Derivations before exports, so
    # that an export finds the column lineage derived from the newest SQL (a derivation is bounded).
    queues = [
        Queue(settings.schedule_queue, connection=connection),
        Queue(settings.derive_queue, connection=connection),
        Queue(settings.export_queue, connection=connection),
    ]
    # with_scheduler: RQ's own scheduler puts delayed jobs (retries after a backoff) back on the queue.
    # ExportWorker: registers again when Redis forgot it, and keeps a local heartbeat file.
    work_until_stopped(lambda: ExportWorker(queues, connection=connection), with_scheduler=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
