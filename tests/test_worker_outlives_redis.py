"""The worker process outlives Redis going away between two jobs (a real redis-server, killed and started
again on its port): RQ's loop ends there, the worker starts a new one once Redis answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from redis import Redis
from rq import Queue
from rq.job import JobStatus

from tests.faults import private_redis, wait_for
from tests.processes import family_env, kill_family
from worker.__main__ import work_until_stopped
from worker.registration import ExportWorker

ROOT = Path(__file__).resolve().parents[1]


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


# The worker as its own process: Redis fails under it while a job runs, and SIGTERM arrives while it
# waits to start again: the signal must end it as its default action does, not reach the handlers the
# ended RQ worker installed.
_WORKER_SCRIPT = """
import sys, time
from redis import Redis
from rq import Queue
from worker.__main__ import work_until_stopped
from worker.registration import ExportWorker

connection = Redis.from_url(sys.argv[1], socket_connect_timeout=1)
queue = Queue("outage-test", connection=connection)

def pause(seconds):
    print("pausing", flush=True)
    time.sleep(120)

work_until_stopped(lambda: ExportWorker([queue], connection=connection), pause, with_scheduler=False)
"""


def test_sigterm_while_the_worker_waits_to_start_again_stops_it_at_once(tmp_path: Path) -> None:
    with private_redis(tmp_path) as server:
        connection = Redis.from_url(server.url, socket_connect_timeout=2)
        queue = Queue("outage-test", connection=connection)
        job = queue.enqueue("time.sleep", 5)  # Redis is killed while it runs
        output = tmp_path / "worker.log"
        env, family = family_env(dict(os.environ))
        with output.open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-c", _WORKER_SCRIPT, server.url], cwd=ROOT, env=env, stdout=log, stderr=log
            )
        try:
            wait_for(lambda: job.get_status(refresh=True) == JobStatus.STARTED, "the job started", 30)
            server.kill()  # Redis gone while the job runs: the worker's loop ends on it
            wait_for(
                lambda: b"pausing" in output.read_bytes(), "the worker pausing before it starts again", 30
            )
            worker.send_signal(signal.SIGTERM)
            # Ended by the signal itself, as a process manager expects; not by the ended worker's handler.
            assert worker.wait(timeout=10) == -signal.SIGTERM
        finally:
            worker.kill()
            worker.wait()
            kill_family(family)  # the job's work-horse, reparented when its worker died
