"""Redis lost (FLUSHALL, or killed and restarted) under real worker and scheduler processes.

Findings 1 and 6 of the fault-injection pass: the schedule must go on by itself after Redis forgot it,
lost export jobs must come back without anyone running the tick by hand, no process may exit because
Redis went away, and the worker's health check must tell "Redis forgot me" from "I am dead".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flask import Flask
from rq import Worker
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.export.queue import export_job_id
from lineage_core.infra.config import Settings
from lineage_core.infra.models import ExportRun, RunStatus, ServiceHeartbeat, utcnow
from lineage_core.ops.heartbeats import TICK, record_beat
from portal import create_app
from tests.faults import Processes, active_connector, fault_stack, product_processes, wait_for
from worker.healthcheck import check
from worker.registration import local_heartbeats

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# The product's timings on a faster clock: the scheduler loops every second, an idle worker heartbeats
# (and so registers again) every 5 s instead of every 45 s.
FAST = {"worker.scheduler": {"INTERVAL_SECONDS": 1}, "worker.registration": {"WORKER_TTL": 20}}
SCHEDULED_JOBS = "rq:scheduler:scheduled_jobs"


def last_tick(db: Session) -> datetime | None:
    db.expire_all()
    at = db.scalar(select(ServiceHeartbeat.at).where(ServiceHeartbeat.name == TICK))
    db.rollback()
    return at


def finished(db: Session, run_id: int) -> ExportRun | None:
    db.expire_all()
    run = db.get(ExportRun, run_id)
    db.rollback()
    return run if run is not None and run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED) else None


def healthcheck(processes: Processes) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.healthcheck"],
        env=processes.env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )


def local_beats(workdir: Path) -> list:  # type: ignore[type-arg]
    return local_heartbeats(workdir / f"openlineage-export-workers-{os.getuid()}")


def test_after_a_flush_the_schedule_goes_on_and_a_lost_export_comes_back(
    moto_endpoint: str, tmp_path: Path
) -> None:
    with (
        fault_stack(moto_endpoint, tmp_path) as stack,
        product_processes(stack.settings, tmp_path, FAST) as procs,
    ):
        connector = active_connector(stack.db, stack.organization_id, stack.bucket)
        procs.start("worker")
        procs.start("worker.scheduler")
        procs.start("worker.scheduler")  # the hot standby
        before = wait_for(lambda: last_tick(stack.db), "the first tick", logs=procs)
        wait_for(lambda: Worker.all(connection=stack.redis.client()), "the worker to register", logs=procs)

        # A run queued a while ago whose job Redis is about to lose.
        run = ExportRun(
            connector_id=connector.id,
            status=RunStatus.QUEUED,
            trigger="manual",
            queued_at=utcnow() - timedelta(minutes=5),
        )
        stack.db.add(run)
        stack.db.commit()
        run.job_id = export_job_id(run.id)
        stack.db.commit()
        flushed_at = utcnow()
        stack.redis.flushall()
        started = time.monotonic()

        # Redis forgot the worker, which is alive: the health check says so and stays healthy.
        healthy, reason = check(
            stack.settings,
            stack.redis.client(),
            socket.gethostname(),
            datetime.now(UTC),
            local_beats(tmp_path),
        )
        assert healthy, reason
        result = healthcheck(procs)
        assert result.returncode == 0, result.stdout + result.stderr

        # The scheduler puts its periodic jobs back, a tick runs, and the lost export runs.
        wait_for(
            lambda: stack.redis.client().zcard(SCHEDULED_JOBS) >= 2, "the periodic jobs back", logs=procs
        )
        wait_for(lambda: (last_tick(stack.db) or before) > flushed_at, "a tick after the flush", logs=procs)
        done = wait_for(lambda: finished(stack.db, run.id), "the lost run to be exported", logs=procs)
        assert done.status is RunStatus.SUCCEEDED, done.error
        assert (
            stack.s3.head_object(Bucket=stack.bucket, Key="lineage/openlineage-events.jsonl")["ETag"]
            == done.etag
        )
        # And the worker is listed in Redis again, by itself.
        (worker,) = wait_for(
            lambda: Worker.all(connection=stack.redis.client()), "the worker listed", logs=procs
        )
        assert stack.settings.export_queue in worker.queue_names()
        print(f"flush → export recorded: {time.monotonic() - started:.1f} s")

        # A worker that is really gone (killed, and Redis forgot it too) is unhealthy.
        worker_process = procs.started[0][1]
        os.kill(worker_process.pid, signal.SIGKILL)
        worker_process.wait(timeout=30)
        stack.redis.flushall()
        healthy, reason = check(
            stack.settings,
            stack.redis.client(),
            socket.gethostname(),
            datetime.now(UTC),
            local_beats(tmp_path),
        )
        assert not healthy and "none is alive" in reason, reason


def test_a_redis_restart_ends_no_process_and_the_schedule_resumes(moto_endpoint: str, tmp_path: Path) -> None:
    with (
        fault_stack(moto_endpoint, tmp_path) as stack,
        product_processes(stack.settings, tmp_path, FAST) as procs,
    ):
        procs.start("worker")
        schedulers = [procs.start("worker.scheduler"), procs.start("worker.scheduler")]
        wait_for(lambda: last_tick(stack.db), "the first tick", logs=procs)

        stack.redis.kill()
        time.sleep(5)  # several scheduler loops and worker heartbeats against no Redis at all
        stack.redis.start()  # empty: nothing on disk
        restarted_at = utcnow()

        wait_for(
            lambda: (last_tick(stack.db) or restarted_at) > restarted_at,
            "a tick after the restart",
            logs=procs,
        )
        assert [process.poll() for _module, process, _log in procs.started] == [None, None, None], (
            procs.tail()
        )
        assert all(scheduler.poll() is None for scheduler in schedulers)
        wait_for(lambda: Worker.all(connection=stack.redis.client()), "the worker listed again", logs=procs)
        result = healthcheck(procs)
        assert result.returncode == 0, result.stdout + result.stderr


def test_healthz_and_metrics_tell_when_the_tick_last_ran(settings: Settings) -> None:
    token = "scrape-token-0123456789"
    app: Flask = create_app(test_config={"TESTING": True}, settings=replace(settings, metrics_token=token))
    client = app.test_client()
    from lineage_core.infra.db import session_factory

    with session_factory(settings.database_url)() as db:
        record_beat(db, TICK, at=utcnow() - timedelta(minutes=2))
        body = client.get("/healthz").get_json()
        assert body["status"] == "ok" and body["checks"]["schedule"] == "ok"
        assert body["last_tick_at"] is not None

        record_beat(db, TICK, at=utcnow() - timedelta(minutes=40))  # the schedule stopped
        response = client.get("/healthz")
        assert response.status_code == 200  # the portal itself is fine: stay in the load balancer
        body = response.get_json()
        assert body["status"] == "degraded" and body["checks"]["schedule"] == "late"
        metrics = client.get("/metrics", headers={"Authorization": f"Bearer {token}"}).get_data(as_text=True)
        (line,) = [row for row in metrics.splitlines() if row.startswith("olx_last_tick_age_seconds ")]
        assert 40 * 60 <= float(line.split()[1]) < 41 * 60
