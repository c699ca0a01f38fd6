"""An export under faults, in a real ``python -m worker``: Redis forgetting a live run, a run taken over,
the database closed mid-export and during the Complete step, an abort that fails.

Findings 2 to 5 of the fault-injection pass. Each test runs its own Redis, database (closed with
``ALLOW_CONNECTIONS false`` and its backends terminated) and S3 proxy (see tests/faults.py); the lease
and RQ's retry backoff are shortened (same code, faster clock) so that each finishes in seconds.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rq import Retry
from sqlalchemy import update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lineage_core.export import queue
from lineage_core.export.queue import request_export
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import ExportRun, RunStatus, UploadState, utcnow
from lineage_core.schedule.tick import run_tick
from tests.faults import (
    Fault,
    FaultStack,
    active_connector,
    fault_stack,
    product_processes,
    store_padded_lineage,
    wait_for,
)
from tests.uploads import uploads_of

pytestmark = [pytest.mark.faults, pytest.mark.slow]

KEY = "lineage/openlineage-events.jsonl"
PREVIOUS = b'{"previous":"snapshot"}\n'
SHORT_LEASE = {
    "lineage_core.export.lease": {"LEASE_SECONDS": 6, "RENEW_SECONDS": 1},
    "lineage_core.export.runs": {"RECORD_BACKOFF_SECONDS": 0.2},
}


@pytest.fixture
def stack(moto_endpoint: str, tmp_path: Path) -> Any:
    with fault_stack(moto_endpoint, tmp_path) as stack:
        stack.s3.put_object(Bucket=stack.bucket, Key=KEY, Body=PREVIOUS)
        # About 10 MB of events: two parts and more, so the export goes through a multipart upload.
        store_padded_lineage(stack.db, stack.organization_id, jobs=100, sql_bytes=100_000)
        yield stack


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """RQ's retries of the export job after 2, 4 and 8 s instead of 1, 5 and 15 minutes."""
    monkeypatch.setattr(queue, "EXPORT_RETRY", Retry(max=3, interval=[2, 4, 8]))


def run_of(db: Session, run_id: int) -> ExportRun:
    """The run as the database holds it now, detached with its columns loaded: the transaction is over
    (no snapshot or connection held while a fault closes the database), and reading the run afterwards
    makes no query, which could meet the database closed."""
    db.expire_all()
    run = db.get(ExportRun, run_id)
    assert run is not None
    db.expunge(run)  # a rollback expires what the session holds: reading it again would query
    db.rollback()
    return run


def ended(db: Session, run_id: int) -> ExportRun | None:
    """The run once it is closed; None while it is not, or while the database is closed to the test too."""
    try:
        run = run_of(db, run_id)
    except OperationalError:
        db.rollback()
        return None
    return run if run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED) else None


def object_etag(stack: FaultStack) -> str:
    return str(stack.s3.head_object(Bucket=stack.bucket, Key=KEY)["ETag"])


def test_a_live_export_survives_a_redis_flush_and_the_tick(stack: FaultStack, tmp_path: Path) -> None:
    connector = active_connector(stack.db, stack.organization_id, stack.bucket)
    part_two = stack.proxy.add(Fault("UploadPart", part=2, delay=8))  # the export is busy for a while
    run = request_export(stack.db, stack.settings, connector, "manual")
    assert run is not None
    long_lease = {"lineage_core.export.lease": {"LEASE_SECONDS": 600, "RENEW_SECONDS": 1}}
    with product_processes(stack.settings, tmp_path, long_lease) as procs:
        procs.start("worker")
        wait_for(lambda: part_two.hits, "the export to be mid-upload", logs=procs)
        stack.redis.flushall()  # the job's Redis record is gone; the export goes on

        # Past the 2 minutes after which a job Redis does not know counted as lost: the lease decides.
        report = run_tick(stack.settings, now=utcnow() + timedelta(minutes=3))
        assert (report.closed, report.left_to_lease) == (0, 1)
        assert run_of(stack.db, run.id).status is RunStatus.RUNNING
        # "Export now" while it runs: still one export in flight for the connector.
        assert request_export(stack.db, stack.settings, connector, "manual") is None

        done = wait_for(lambda: ended(stack.db, run.id), "the export to finish", logs=procs)
    assert done.status is RunStatus.SUCCEEDED, done.error
    assert done.etag == object_etag(stack)
    assert stack.proxy.kinds().count("CreateMultipartUpload") == 1


def test_an_attempt_whose_run_was_taken_over_stops_before_complete(stack: FaultStack, tmp_path: Path) -> None:
    connector = active_connector(stack.db, stack.organization_id, stack.bucket)
    run = request_export(stack.db, stack.settings, connector, "manual")
    assert run is not None

    def take_over() -> None:
        # What another attempt's claim does once it finds the lease expired (from the proxy's thread).
        with session_factory(stack.settings.database_url)() as other:
            other.execute(
                update(ExportRun)
                .where(ExportRun.id == run.id)
                .values(lease_owner="another-attempt", lease_expires_at=utcnow() + timedelta(minutes=10))
            )
            other.commit()

    taken = stack.proxy.add(Fault("UploadPart", part=2, delay=3, before=take_over, times=1))
    with product_processes(stack.settings, tmp_path, SHORT_LEASE) as procs:
        procs.start("worker")
        wait_for(lambda: taken.hits, "the takeover", logs=procs)
        wait_for(
            lambda: UploadState.ABORTED in uploads_of(stack.db, run.id).values(),
            "the upload aborted",
            logs=procs,
        )
    assert "CompleteMultipartUpload" not in stack.proxy.kinds()
    assert stack.s3.get_object(Bucket=stack.bucket, Key=KEY)["Body"].read() == PREVIOUS
    untouched = run_of(stack.db, run.id)
    assert (untouched.status, untouched.lease_owner) == (RunStatus.RUNNING, "another-attempt")


def test_a_database_outage_mid_export_ends_in_a_retried_export(
    stack: FaultStack, tmp_path: Path, quick_retries: None
) -> None:
    connector = active_connector(stack.db, stack.organization_id, stack.bucket)
    reopened: list[threading.Thread] = []
    # The database goes away for 8 s just as the upload starts: the UploadId cannot be recorded, the
    # run cannot even be put back to queued, and RQ's first retries cannot reach the database either.
    stack.proxy.add(
        Fault("CreateMultipartUpload", times=1, before=lambda: reopened.append(stack.database.close_for(8)))
    )
    run = request_export(stack.db, stack.settings, connector, "manual")
    assert run is not None
    with product_processes(stack.settings, tmp_path, SHORT_LEASE) as procs:
        procs.start("worker")
        done = wait_for(
            lambda: not stack.database.closed.is_set() and ended(stack.db, run.id), "the retry", logs=procs
        )
    assert done.status is RunStatus.SUCCEEDED, done.error
    assert done.etag == object_etag(stack)
    assert stack.s3.list_multipart_uploads(Bucket=stack.bucket).get("Uploads", []) == []


def test_a_complete_whose_outcome_was_not_recorded_is_recorded_by_the_next_attempt(
    stack: FaultStack, tmp_path: Path, quick_retries: None
) -> None:
    connector = active_connector(stack.db, stack.organization_id, stack.bucket)
    # The database goes away while CompleteMultipartUpload is on the wire: S3 completes, nothing is recorded.
    stack.proxy.add(Fault("CompleteMultipartUpload", times=1, before=lambda: stack.database.close_for(6)))
    run = request_export(stack.db, stack.settings, connector, "manual")
    assert run is not None
    with product_processes(stack.settings, tmp_path, SHORT_LEASE) as procs:
        procs.start("worker")
        done = wait_for(
            lambda: not stack.database.closed.is_set() and ended(stack.db, run.id), "the retry", logs=procs
        )
    assert done.status is RunStatus.SUCCEEDED, done.error
    assert done.etag == object_etag(stack)  # the file in the bucket is the one the run says it wrote
    assert done.error is None and done.events == 100
    # Found out, not exported again: one upload, one Complete.
    kinds = stack.proxy.kinds()
    assert (kinds.count("CreateMultipartUpload"), kinds.count("CompleteMultipartUpload")) == (1, 1)
    assert list(uploads_of(stack.db, run.id).values()) == [UploadState.COMPLETED]


def test_uploads_whose_abort_failed_are_aborted_by_the_next_success(
    stack: FaultStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue, "EXPORT_RETRY", Retry(max=1, interval=[3]))
    connector = active_connector(stack.db, stack.organization_id, stack.bucket)
    # The first attempt: part 2 fails (S3 500, retried by botocore, then by RQ), and so does its abort.
    stack.proxy.add(Fault("UploadPart", part=2, status=500, code="InternalError"))
    aborts = stack.proxy.add(Fault("AbortMultipartUpload", status=503, code="SlowDown"))
    run = request_export(stack.db, stack.settings, connector, "manual")
    assert run is not None
    with product_processes(stack.settings, tmp_path) as procs:
        procs.start("worker")
        wait_for(
            lambda: run_of(stack.db, run.id).status is RunStatus.QUEUED and aborts.hits,
            "attempt 1",
            logs=procs,
        )
        (first,) = uploads_of(stack.db, run.id)
        assert stack.s3.list_multipart_uploads(Bucket=stack.bucket)["Uploads"][0]["UploadId"] == first
        stack.proxy.clear()  # S3 is well again for RQ's retry
        done = wait_for(lambda: ended(stack.db, run.id), "the retry", logs=procs)
    assert done.status is RunStatus.SUCCEEDED, done.error
    # The first attempt's upload, whose abort failed, was aborted after the new file was in place.
    assert stack.s3.list_multipart_uploads(Bucket=stack.bucket).get("Uploads", []) == []
    states = uploads_of(stack.db, run.id)
    assert states[first] is UploadState.ABORTED
    assert sorted(states.values()) == sorted([UploadState.ABORTED, UploadState.COMPLETED])
