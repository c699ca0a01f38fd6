"""``python -m worker``: an RQ worker on the export queue (the Procfile's worker process)."""

from __future__ import annotations

from redis import Redis
from rq import Queue

import worker.jobs  # noqa: F401  (imported here, once, rather than in every job's fork)
from lineage_core.infra.process import prepare_for_jobs, start_process
from worker.registration import ExportWorker


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
    ExportWorker(queues, connection=connection).work(with_scheduler=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
