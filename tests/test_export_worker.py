"""The export job in a real RQ worker (``python -m worker``), against real Redis, PostgreSQL and moto."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from rq.job import Job, JobStatus
from sqlalchemy.orm import Session

from lineage_core.export import checksum
from lineage_core.export.failures import INTERRUPTED_MESSAGE
from lineage_core.export.queue import EXPORT_JOB_TIMEOUT_SECONDS, export_job_id, request_export
from lineage_core.export.run import run_export
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ExportRun, Organization, RunStatus
from lineage_core.schedule.rules import next_nightly_run_after
from lineage_core.schedule.tick import run_tick
from tests.factories import BUCKET, KEY, PREVIOUS, feature_events, make_connector, padded_events, store_events
from tests.faults import child_pids
from tests.services import GatedMotoServer, is_upload_part, pending_uploads, running_process, s3_client
from tests.uploads import pending_upload_ids

WAIT_SECONDS = 120  # an upper bound for slow CI machines; no assertion depends on how long anything takes

pytestmark = pytest.mark.slow  # each starts a worker process


def worker_process(settings: Settings, log: Path) -> Any:
    """``python -m worker`` for these settings, its output in ``log``."""
    return running_process(settings, "worker", log)


def wait_for(condition: Callable[[], Any], what: str, log: Path) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}; worker log:\n{log.read_text()[-5000:]}")


def finished_run(db: Session, run_id: int) -> ExportRun | None:
    db.expire_all()
    run = db.get(ExportRun, run_id)
    db.rollback()
    return run if run is not None and run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED) else None


def test_an_export_requested_like_save_does_runs_in_a_worker(
    settings: Settings, db: Session, org: Organization, aws: str, tmp_path: Path
) -> None:
    s3 = s3_client(aws)
    s3.create_bucket(Bucket=BUCKET)
    store_events(db, org.id, feature_events(jobs=5))
    run = request_export(db, settings, make_connector(db, org), "first")
    assert run is not None
    log = tmp_path / "worker.log"

    with worker_process(settings, log):
        done = wait_for(lambda: finished_run(db, run.id), "the run to finish", log)

    assert done.status is RunStatus.SUCCEEDED, done.error
    data = s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read()
    assert (done.events, done.bytes) == (9, len(data))
    job = Job.fetch(export_job_id(run.id), connection=Redis.from_url(settings.redis_url))
    assert job.get_status() == JobStatus.FINISHED
    assert job.return_value() == {
        "run_id": run.id,
        "events": 9,
        "bytes": len(data),
        "etag": done.etag,
        "version_id": None,
        "trimmed": 0,
        "omitted": 0,
        "checksum_crc64nvme": checksum.encoded_crc(data),
        "tagging_error": None,
    }


def test_a_failed_export_fails_its_rq_job_and_records_why(
    settings: Settings, db: Session, org: Organization, aws: str, tmp_path: Path
) -> None:
    run = request_export(db, settings, make_connector(db, org, bucket="missing-bucket"), "schedule")
    assert run is not None
    log = tmp_path / "worker.log"

    with worker_process(settings, log):
        done = wait_for(lambda: finished_run(db, run.id), "the run to finish", log)
        job = Job.fetch(export_job_id(run.id), connection=Redis.from_url(settings.redis_url))
        wait_for(lambda: job.get_status(refresh=True) == JobStatus.FAILED, "RQ to fail the job", log)

    assert done.status is RunStatus.FAILED
    assert done.error is not None
    assert done.error.startswith("Could not write to s3://missing-bucket/foundational/openlineage/")
    # Raised, not returned: RQ holds the exception, and the job has no result.
    latest = job.latest_result()
    assert latest is not None and latest.exc_string is not None
    assert (
        "lineage_core.export.failures.ExportError: Could not write to s3://missing-bucket/"
        in latest.exc_string
    )
    assert job.return_value() is None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the work-horse through Linux's /proc")
def test_a_worker_killed_mid_upload_leaves_the_previous_snapshot(
    settings: Settings, db: Session, org: Organization, aws: str, tmp_path: Path
) -> None:
    s3 = s3_client(aws)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=PREVIOUS)
    # About 11 MB of events: more than one 5 MiB part, so the export goes through a multipart upload.
    store_events(db, org.id, padded_events(jobs=100, sql_bytes=100_000))
    run = request_export(db, settings, make_connector(db, org), "schedule")
    assert run is not None
    gate = GatedMotoServer(hold=is_upload_part(1))
    log = tmp_path / "worker.log"
    try:
        with worker_process(replace(settings, aws_endpoint_url=gate.endpoint), log) as worker:
            # The worker is now in the middle of the export: the upload has begun and part 1 is on the wire.
            assert gate.reached.wait(timeout=WAIT_SECONDS), log.read_text()[-5000:]
            horses = child_pids(worker.pid)
            assert horses, "the job runs in a work-horse process"
            # The machine goes away: the worker and its work-horse die at once, with no chance to clean up.
            os.kill(worker.pid, signal.SIGKILL)
            for horse in horses:
                os.kill(horse, signal.SIGKILL)
            worker.wait(timeout=WAIT_SECONDS)
            for horse in horses:
                wait_for(lambda h=horse: not Path(f"/proc/{h}").exists(), "the work-horse to die", log)
    finally:
        gate.close()  # lets the held request reach moto now that its sender is dead

    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == PREVIOUS
    # Readers cannot see the dead upload, and no process is left to abort it; the run knows its id.
    (dead_upload,) = pending_uploads(s3, BUCKET)
    assert dead_upload["Key"] == KEY
    db.expire_all()
    stuck = db.get(ExportRun, run.id)
    assert stuck is not None and stuck.status is RunStatus.RUNNING and stuck.started_at is not None
    assert pending_upload_ids(db, run.id) == [dead_upload["UploadId"]]

    # The scheduler's tick closes it: here through the job timeout (RQ notices the dead worker only
    # after its heartbeat expires), and the retry is the next night's run, not the next interval.
    past_timeout = stuck.started_at + timedelta(seconds=EXPORT_JOB_TIMEOUT_SECONDS + 300)
    assert run_tick(settings, now=past_timeout).closed == 1
    db.expire_all()
    closed = db.get(ExportRun, run.id)
    assert closed is not None and closed.status is RunStatus.FAILED
    assert closed.error == INTERRUPTED_MESSAGE
    connector = db.get(Connector, closed.connector_id)
    assert connector is not None and connector.next_export_at == next_nightly_run_after(past_timeout)

    # The next export puts the new file in place and aborts the dead upload.
    retry = request_export(db, settings, connector, "manual")
    assert retry is not None
    run_export(settings, retry.id)
    assert s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() != PREVIOUS
    assert pending_uploads(s3, BUCKET) == []
    db.expire_all()
    assert pending_upload_ids(db, run.id) == []
