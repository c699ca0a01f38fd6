"""``python -m worker.scheduler``: the Procfile's scheduler process (rq-scheduler).

Reconciles the periodic jobs of :mod:`worker.periodic_jobs`, then moves them onto the schedule queue as
they come due. Several may run: rq-scheduler takes a lock, so only one enqueues at a time.
"""

from __future__ import annotations

import logging

from redis import Redis
from rq_scheduler import Scheduler

from lineage_core.infra.process import start_process
from worker.periodic_jobs import reconcile


def main() -> int:
    settings = start_process("scheduler")
    connection = Redis.from_url(settings.redis_url)
    scheduler = Scheduler(queue_name=settings.schedule_queue, connection=connection, interval=30)
    changes = reconcile(scheduler, settings.schedule_queue)
    logging.getLogger(__name__).info("periodic jobs reconciled: %s", changes)
    scheduler.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
