"""The worker process outlives Redis going away between two jobs (a real redis-server, killed and started
again on its port): RQ's loop ends there, the worker starts a new one once Redis answers."""

from __future__ import annotations

from pathlib import Path

from redis import Redis
from rq import Queue

from tests.faults import private_redis
from worker.__main__ import work_until_stopped
from worker.registration import ExportWorker


def test_a_worker_whose_redis_went_away_starts_again_and_works(tmp_path: Path) -> None:
    with private_redis(tmp_path) as server:
        connection = Redis.from_url(server.url, socket_connect_timeout=2)
        queue = Queue("outage-test", connection=connection)
        server.kill()  # Redis gone when the worker's loop talks to it
        pauses: list[float] = []

        def pause(seconds: float) -> None:
            pauses.append(seconds)
            if len(pauses) == 2:
                server.start()  # back, empty, after two failed starts
                queue.enqueue("builtins.len", "four")

        work_until_stopped(
            lambda: ExportWorker([queue], connection=connection), pause, burst=True, with_scheduler=False
        )
        assert pauses == [1.0, 2.0]  # a backoff between attempts, not a busy loop
        (job_id,) = queue.finished_job_registry.get_job_ids()
        assert queue.fetch_job(job_id).return_value() == 4  # type: ignore[union-attr]
