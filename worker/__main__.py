"""``python -m worker``: an RQ worker on the export queue (the Procfile's worker process)."""

from __future__ import annotations

from redis import Redis
from rq import Queue, Worker

from lineage_core.process import start_process


def main() -> int:
    settings = start_process("worker")
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
