"""``python -m worker``: an RQ worker on the export queue (the Procfile's worker process)."""

from __future__ import annotations

import logging
import sys

from redis import Redis
from rq import Queue, Worker

from lineage_core.config import ConfigError, Settings


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        settings = Settings.from_env()
    except ConfigError as error:
        print(f"worker: {error}", file=sys.stderr)
        return 2
    connection = Redis.from_url(settings.redis_url)
    # The schedule's tick first: it is short, and exports wait on it.
    queues = [
        Queue(settings.schedule_queue, connection=connection),
        Queue(settings.export_queue, connection=connection),
    ]
    # with_scheduler: RQ's own scheduler puts delayed jobs (retries after a backoff) back on the queue.
    Worker(queues, connection=connection).work(with_scheduler=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
