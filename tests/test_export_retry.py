"""Transient failures are retried by RQ with backoff before the run counts as failed; others are not.

An in-process RQ ``SimpleWorker`` against the real Redis runs the real job function, so RQ's own Retry
bookkeeping decides. S3's 503 SlowDown comes from botocore's Stubber (moto never throttles), and the
stubbed client stands in for the export's S3 client only.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import JobStatus
from sqlalchemy.orm import Session

from lineage_core.export.queue import EXPORT_RETRY, enqueue_runs, export_job_id
from lineage_core.export.run import TransientExportError, run_export
from lineage_core.infra.aws import AssumedCredentials, LiveAwsClients
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Organization, RunStatus
from tests.factories import make_connector, make_run
from tests.readback import body, run_of
from tests.services import process_env


def _slow_down_s3(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    stubbed = boto3.client("s3", region_name="us-east-1")
    stub = Stubber(stubbed)
    stub.add_client_error(
        "put_object",
        service_error_code="SlowDown",
        service_message="Please reduce your request rate.",
        http_status_code=503,
    )
    stub.activate()

    def s3(self: LiveAwsClients, credentials: AssumedCredentials, region: str) -> Any:
        return stubbed

    monkeypatch.setattr(LiveAwsClients, "s3", s3)
    return stub


@pytest.fixture
def job_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in process_env(settings).items():
        monkeypatch.setenv(name, value)


def _work_once(settings: Settings) -> Queue:
    connection = Redis.from_url(settings.redis_url)
    queue = Queue(settings.export_queue, connection=connection)
    SimpleWorker([queue], connection=connection).work(burst=True)
    return queue


def test_a_transient_failure_requeues_the_run_for_rq_to_retry(
    settings: Settings,
    db: Session,
    org: Organization,
    s3: Any,
    job_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = make_run(db, make_connector(db, org)).id
    enqueue_runs(settings, [run_id])
    _slow_down_s3(monkeypatch)
    queue = _work_once(settings)

    job = queue.fetch_job(export_job_id(run_id))
    assert job is not None
    assert job.get_status() == JobStatus.SCHEDULED  # RQ's retry, after the first backoff
    assert job.retries_left == EXPORT_RETRY.max - 1
    run = run_of(db, run_id)
    assert run.status is RunStatus.QUEUED and run.started_at is None
    assert run.error is not None and run.error.startswith("Retrying after: ")
    assert "SlowDown" in run.error

    # The retry runs as RQ would after the backoff, now that S3 answers: the export succeeds.
    monkeypatch.undo()
    for name, value in process_env(settings).items():
        monkeypatch.setenv(name, value)
    queue.scheduled_job_registry.remove(job)
    queue.enqueue_job(job)
    _work_once(settings)
    assert run_of(db, run_id).status is RunStatus.SUCCEEDED
    assert body(s3) == b""


def test_a_failure_an_admin_must_fix_is_not_retried(
    settings: Settings, db: Session, org: Organization, job_env: None
) -> None:
    # No bucket: "Could not write to s3://…: the bucket does not exist" needs the admin, not a retry.
    run_id = make_run(db, make_connector(db, org)).id
    enqueue_runs(settings, [run_id])
    queue = _work_once(settings)
    job = queue.fetch_job(export_job_id(run_id))
    assert job is not None and job.get_status() == JobStatus.FAILED
    assert queue.scheduled_job_registry.count == 0
    run = run_of(db, run_id)
    assert run.status is RunStatus.FAILED and run.error is not None and run.error.startswith("Could not")


def test_the_last_attempt_records_the_transient_failure(
    settings: Settings, db: Session, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = make_run(db, make_connector(db, org)).id
    _slow_down_s3(monkeypatch)
    with pytest.raises(TransientExportError):
        run_export(settings, run_id, retry_pending=False)
    assert run_of(db, run_id).status is RunStatus.FAILED
