"""The worker process and its health check, with a real ``python -m worker`` against real Redis."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime

from redis import Redis
from rq import Worker

from lineage_core.infra.config import Settings
from tests.services import running_worker
from worker.healthcheck import check


def _wait_for_worker(connection: Redis, timeout: float = 20) -> Worker:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = Worker.all(connection=connection)
        if workers:
            return workers[0]
        time.sleep(0.1)
    raise AssertionError("the worker never registered")


def test_a_running_worker_is_healthy_and_listens_to_its_three_queues(settings: Settings) -> None:
    connection = Redis.from_url(settings.redis_url)
    with running_worker(settings):
        worker = _wait_for_worker(connection)
        assert worker.queue_names() == [settings.schedule_queue, settings.derive_queue, settings.export_queue]
        healthy, reason = check(settings, connection, socket.gethostname(), datetime.now(UTC))
        assert healthy, reason


def test_no_worker_is_unhealthy(settings: Settings) -> None:
    healthy, reason = check(
        settings, Redis.from_url(settings.redis_url), socket.gethostname(), datetime.now(UTC)
    )
    assert not healthy
    assert "no worker" in reason


def test_worker_refuses_to_start_without_settings() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "worker"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "SECRET_KEY" in result.stderr
