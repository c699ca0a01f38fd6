"""The export of one run, in process: real PostgreSQL, the moto server over HTTP, the lineage importer.

The tests with a real RQ worker (the job, its failure in RQ, SIGKILL) are in test_export_worker.py.
"""

from __future__ import annotations

import gc
import io
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import orjson
import pytest
from botocore.stub import Stubber
from sqlalchemy.orm import Session

from lineage_core.export import checksum
from lineage_core.export.events import EventWriter
from lineage_core.export.run import ExportError, TransientExportError, run_export
from lineage_core.export.s3_stream import MIN_PART_SIZE, NDJSON_CONTENT_TYPE
from lineage_core.export.snapshot import GENERATION_GC_THRESHOLD, write_snapshot_lines
from lineage_core.infra.aws import AssumedCredentials, LiveAwsClients
from lineage_core.infra.config import Settings
from lineage_core.infra.models import ConnectorStatus, Organization, RunStatus, UploadState, utcnow
from lineage_core.lineage.importer import import_events
from lineage_core.schedule.rules import next_nightly_run_after
from tests.factories import (
    BUCKET,
    KEY,
    PREVIOUS,
    ROLE_ARN,
    feature_events,
    make_connector,
    make_org,
    make_run,
    padded_events,
    store_events,
)
from tests.openlineage_spec import problems_of_file
from tests.readback import body, graph_of, load_with_openlineage_classes, run_of
from tests.services import fail_upload_part, pending_uploads
from tests.uploads import add_pending_upload, pending_upload_ids, uploads_of

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
VALIDATOR = SHARED / "tools" / "validate_openlineage.py"


class HookedClients(LiveAwsClients):
    """The live clients (moto over HTTP), with a hook to instrument the S3 client the export uses."""

    def __init__(self, settings: Settings, instrument: Any) -> None:
        super().__init__(settings)
        self._instrument = instrument

    def s3(self, credentials: AssumedCredentials, region: str) -> Any:
        client = super().s3(credentials, region)
        self._instrument(client)
        return client


def test_the_uploaded_file_parses_back_into_the_stored_graph(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    store_events(db, org.id, feature_events())
    connector = make_connector(db, org)
    run_id = make_run(db, connector).id

    result = run_export(settings, run_id)

    data = body(s3)
    head = s3.head_object(Bucket=BUCKET, Key=KEY, ChecksumMode="ENABLED")
    assert head["ContentType"] == NDJSON_CONTENT_TYPE
    lines = data.splitlines()
    assert len(lines) == 34  # one event per job: 30 generated, 4 hand-made
    assert head["ChecksumCRC64NVME"] == checksum.encoded_crc(data)
    run = run_of(db, run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert run.started_at is not None and run.finished_at is not None and run.started_at <= run.finished_at
    assert (run.events, run.bytes, run.etag, run.version_id, run.trimmed, run.omitted, run.error) == (
        34,
        len(data),
        head["ETag"],
        None,
        0,
        0,
        None,
    )
    assert result is not None and result.as_dict() == {
        "run_id": run_id,
        "events": 34,
        "bytes": len(data),
        "etag": head["ETag"],
        "version_id": None,
        "trimmed": 0,
        "omitted": 0,
        "checksum_crc64nvme": checksum.encoded_crc(data),
        "tagging_error": None,
    }
    # The schedule counts the interval from the snapshot time of the last success.
    db.refresh(connector)
    assert connector.next_export_at == run.started_at + timedelta(days=14)

    copy = make_org(db, "acme-copy")
    report = import_events(db, copy.id, io.BytesIO(data))
    assert report.rejected == 0 and report.stored == 34

    expected = graph_of(db, org.id)
    for job in expected:
        for dataset in job["inputs"] + job["outputs"]:
            for field in dataset["fields"]:
                # A field no producer typed goes out as "UNKNOWN" (consumers need a type) and comes back so.
                field.setdefault("type", "UNKNOWN")
        if job["lineage_event_time"] is not None:
            # Every event of the snapshot is at the snapshot's time (the run's start), in milliseconds.
            job["lineage_event_time"] = run.started_at.replace(
                microsecond=run.started_at.microsecond // 1000 * 1000
            )
    assert graph_of(db, copy.id) == expected


def test_a_job_over_300_kb_is_trimmed_and_the_run_counts_it(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    small = padded_events(jobs=3, sql_bytes=100)
    (huge,) = padded_events(jobs=1, sql_bytes=320_000, seed=12)  # its SQL alone is over the limit
    store_events(db, org.id, [*small, huge])
    run_id = make_run(db, make_connector(db, org)).id

    result = run_export(settings, run_id)

    run = run_of(db, run_id)
    assert (run.status, run.events, run.trimmed, run.omitted) == (RunStatus.SUCCEEDED, 4, 1, 0)
    assert result is not None and (result.trimmed, result.omitted) == (1, 0)
    events = [orjson.loads(line) for line in body(s3).splitlines()]
    trimmed = next(e for e in events if e["job"]["name"] == huge["job"]["name"])
    assert "sql" not in trimmed["job"]["facets"] and trimmed["outputs"]  # still its table lineage
    assert all("sql" in e["job"]["facets"] for e in events if e is not trimmed)
    assert max(len(line) for line in body(s3).splitlines()) <= 300_000


def test_every_line_loads_into_openlineage_python_classes(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    store_events(db, org.id, feature_events(jobs=10))
    run_export(settings, make_run(db, make_connector(db, org)).id)

    for line in body(s3).splitlines():
        load_with_openlineage_classes(orjson.loads(line))


def test_every_line_validates_against_the_openlineage_spec(
    settings: Settings, db: Session, org: Organization, s3: Any, tmp_path: Path
) -> None:
    store_events(db, org.id, feature_events())
    run_export(settings, make_run(db, make_connector(db, org)).id)
    lines = body(s3).splitlines()

    # The official schemas the repository carries (tests/data/openlineage-spec), in any clone.
    assert len(lines) == 34
    assert problems_of_file(lines) == []
    if VALIDATOR.is_file():
        # Where the shared validator is on the machine too: its --strict warnings (consumer quirks,
        # _schemaURL versions, naming) count as errors.
        export = tmp_path / "openlineage-events.jsonl"
        export.write_bytes(body(s3))
        result = subprocess.run(
            [sys.executable, str(VALIDATOR), str(export), "--strict"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        assert result.stdout.strip().splitlines()[-1] == "34 valid, 0 invalid"


def test_an_org_without_lineage_gives_an_empty_file_at_the_bucket_root(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    s3.put_object(Bucket=BUCKET, Key="openlineage-events.jsonl", Body=PREVIOUS)
    run_id = make_run(db, make_connector(db, org, prefix="")).id

    run_export(settings, run_id)

    assert body(s3, "openlineage-events.jsonl") == b""
    run = run_of(db, run_id)
    assert (run.status, run.events, run.bytes) == (RunStatus.SUCCEEDED, 0, 0)


@pytest.mark.parametrize("prefix", ["", "lineage", "teams/data/openlineage"])
def test_the_file_lands_directly_under_the_prefix_and_nowhere_else(
    settings: Settings, db: Session, org: Organization, s3: Any, prefix: str
) -> None:
    store_events(db, org.id, feature_events(jobs=3))
    s3.put_object(Bucket=BUCKET, Key="elsewhere/keep.txt", Body=b"x")

    run_export(settings, make_run(db, make_connector(db, org, prefix=prefix)).id)

    key = f"{prefix}/openlineage-events.jsonl" if prefix else "openlineage-events.jsonl"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {key, "elsewhere/keep.txt"}
    assert len(body(s3, key).splitlines()) == 7


def test_kms_key_and_bucket_versioning(
    aws: str, settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    key_arn = boto3.client("kms", endpoint_url=aws, region_name="us-east-1").create_key()["KeyMetadata"][
        "Arn"
    ]
    store_events(db, org.id, feature_events(jobs=3))
    run_id = make_run(db, make_connector(db, org, kms_key_arn=key_arn)).id

    run_export(settings, run_id)

    head = s3.head_object(Bucket=BUCKET, Key=KEY)
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", key_arn)
    assert run_of(db, run_id).version_id == head["VersionId"]


def test_an_s3_error_mid_upload_leaves_the_previous_file_and_records_the_reason(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    # About 6.6 MB of events: two parts of 5 MiB, so part 2 fails in the middle of the upload.
    store_events(db, org.id, padded_events(jobs=60, sql_bytes=100_000))
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=PREVIOUS)
    connector = make_connector(db, org)
    run_id = make_run(db, connector).id
    sent: list[list[int]] = []
    clients = HookedClients(settings, lambda client: sent.append(fail_upload_part(client, part_number=2)))

    with pytest.raises(ExportError) as raised:
        run_export(settings, run_id, clients=clients, part_size=MIN_PART_SIZE, upload_threads=1)

    message = (
        f"Could not write to s3://{BUCKET}/{KEY}: UploadPart failed, AccessDenied (Access Denied). "
        "Check the bucket name, and that the role's policy covers the bucket and prefix. "
        "The previous export file is unchanged."
    )
    assert str(raised.value) == message
    assert not isinstance(raised.value, TransientExportError)
    assert sent == [[1, 2]]
    assert body(s3) == PREVIOUS
    assert pending_uploads(s3, BUCKET) == []
    run = run_of(db, run_id)
    assert (run.status, run.error, run.events, run.etag) == (RunStatus.FAILED, message, None, None)
    assert run.finished_at is not None
    db.refresh(connector)
    assert connector.next_export_at == next_nightly_run_after(run.finished_at)  # spec: retry the next day


def test_an_interrupted_export_is_aborted_recorded_and_the_interrupt_propagates(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    store_events(db, org.id, padded_events(jobs=60, sql_bytes=100_000))
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=PREVIOUS)
    run_id = make_run(db, make_connector(db, org)).id

    def interrupt(**_kwargs: Any) -> None:
        raise KeyboardInterrupt  # as if the worker were told to stop while part 1 was being sent

    def instrument(client: Any) -> None:
        client.meta.events.register("after-call.s3.UploadPart", interrupt)

    with pytest.raises(KeyboardInterrupt):
        run_export(settings, run_id, clients=HookedClients(settings, instrument), part_size=MIN_PART_SIZE)

    assert body(s3) == PREVIOUS
    assert pending_uploads(s3, BUCKET) == []
    run = run_of(db, run_id)
    assert run.status is RunStatus.FAILED
    assert run.error is not None and run.error.startswith("The export was interrupted before it finished")


def test_a_trust_role_that_cannot_be_assumed_is_reported_in_the_spec_words(
    settings: Settings, db: Session, org: Organization
) -> None:
    # moto lets any role be assumed with any External ID, so AWS's refusal is played by a Stubber.
    sts = boto3.client("sts", region_name="us-east-1")
    stub = Stubber(sts)
    stub.add_client_error(
        "assume_role",
        service_error_code="AccessDenied",
        service_message=f"User: arn:aws:iam::123456789012:user/vendor is not authorized to assume {ROLE_ARN}",
        http_status_code=403,
    )

    class Clients(LiveAwsClients):
        def sts(self) -> Any:
            return sts

    run_id = make_run(db, make_connector(db, org)).id
    with stub, pytest.raises(ExportError) as raised:
        run_export(settings, run_id, clients=Clients(settings))

    assert str(raised.value).startswith(f"Could not assume the trust role {ROLE_ARN}: AccessDenied (User: ")
    assert "still exists in AWS account 210987654321" in str(raised.value)
    run = run_of(db, run_id)
    assert (run.status, run.error) == (RunStatus.FAILED, str(raised.value))


def test_a_missing_bucket_is_reported(settings: Settings, db: Session, org: Organization, aws: str) -> None:
    run_id = make_run(db, make_connector(db, org, bucket="no-such-bucket")).id

    with pytest.raises(ExportError, match="the bucket no-such-bucket does not exist"):
        run_export(settings, run_id)

    error = run_of(db, run_id).error
    assert error is not None
    assert error.startswith("Could not write to s3://no-such-bucket/foundational/openlineage/")


def test_throttling_is_a_transient_failure(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    # S3's 503 SlowDown, which botocore would retry with real sleeps; a Stubber answers at once instead.
    stubbed = boto3.client("s3", region_name="us-east-1")
    stub = Stubber(stubbed)
    stub.add_client_error(
        "put_object",
        service_error_code="SlowDown",
        service_message="Please reduce your request rate.",
        http_status_code=503,
    )

    class Clients(LiveAwsClients):
        def s3(self, credentials: AssumedCredentials, region: str) -> Any:
            return stubbed

    run_id = make_run(db, make_connector(db, org)).id
    with stub, pytest.raises(TransientExportError, match=r"SlowDown \(Please reduce your request rate.\)"):
        run_export(settings, run_id, clients=Clients(settings))
    assert run_of(db, run_id).status is RunStatus.FAILED


def test_a_run_that_is_not_queued_is_left_alone(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    connector = make_connector(db, org)
    closed = make_run(
        db,
        connector,
        RunStatus.FAILED,
        trigger="schedule",
        finished_at=utcnow(),
        error="closed by the tick",
    )

    assert run_export(settings, closed.id) is None
    assert run_export(settings, 999_999) is None

    run = run_of(db, closed.id)
    assert (run.status, run.started_at, run.error) == (RunStatus.FAILED, None, "closed by the tick")
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_a_paused_connector_is_not_exported(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    run_id = make_run(db, make_connector(db, org, status=ConnectorStatus.PAUSED)).id

    with pytest.raises(ExportError, match="The connection is paused"):
        run_export(settings, run_id)

    assert run_of(db, run_id).status is RunStatus.FAILED
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_the_export_reads_only_its_own_organization(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    other = make_org(db, "other")
    store_events(db, other.id, feature_events(jobs=5))
    store_events(db, org.id, feature_events(jobs=2, seed=9)[:2])

    run_export(settings, make_run(db, make_connector(db, org)).id)

    names = {orjson.loads(line)["job"]["name"] for line in body(s3).splitlines()}
    assert names == {e["job"]["name"] for e in feature_events(jobs=2, seed=9)[:2]}


def test_the_collector_runs_less_often_only_while_a_snapshot_is_generated(
    settings: Settings, db: Session, org: Organization
) -> None:
    store_events(db, org.id, feature_events(jobs=3))
    before = gc.get_threshold()
    lines = write_snapshot_lines(db, org.id, EventWriter(utcnow()))

    next(lines)
    assert gc.get_threshold()[0] == GENERATION_GC_THRESHOLD
    lines.close()  # stopped half way, as a failed upload stops it

    assert gc.get_threshold() == before
    assert len(list(write_snapshot_lines(db, org.id, EventWriter(utcnow())))) == 7  # 3 + 4 hand-made
    assert gc.get_threshold() == before


def test_uploads_left_pending_by_earlier_runs_are_aborted_by_the_next_export(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    store_events(db, org.id, padded_events(jobs=60, sql_bytes=100_000))  # ~6.6 MB: a multipart upload
    connector = make_connector(db, org)
    # A run whose worker died mid-upload left this upload pending (see test_export_worker's SIGKILL).
    pending = s3.create_multipart_upload(Bucket=BUCKET, Key=KEY)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=KEY, UploadId=pending, PartNumber=1, Body=b"x" * MIN_PART_SIZE)
    died = make_run(db, connector, RunStatus.FAILED)
    add_pending_upload(db, died, pending)
    # One whose upload S3 no longer knows (aborted, or expired by a lifecycle rule).
    gone = make_run(db, connector, RunStatus.FAILED)
    add_pending_upload(db, gone, "no-such-upload")
    recorded: list[str | None] = []
    # Parts go up from several threads at once; the lock makes only the first part look, and keeps
    # the test's Session to one thread at a time.
    first_part = threading.Lock()

    def record_upload_id(**_: Any) -> None:
        with first_part:
            if not recorded:
                recorded.extend(pending_upload_ids(db, run_id))

    def check_recorded(client: Any) -> None:
        # While the new upload runs, its UploadId is on the run already (committed before part 1).
        client.meta.events.register("before-call.s3.UploadPart", record_upload_id)

    run_id = make_run(db, connector).id
    run_export(settings, run_id, clients=HookedClients(settings, check_recorded))

    assert pending_uploads(s3, BUCKET) == []
    assert len(recorded) == 1 and recorded[0] not in (None, pending)
    assert [pending_upload_ids(db, r) for r in (died.id, gone.id, run_id)] == [[], [], []]
    assert uploads_of(db, died.id) == {pending: UploadState.ABORTED}
    assert uploads_of(db, gone.id) == {"no-such-upload": UploadState.GONE}
    assert list(uploads_of(db, run_id).values()) == [UploadState.COMPLETED]
    assert run_of(db, run_id).status is RunStatus.SUCCEEDED


def test_a_failed_cleanup_keeps_the_upload_for_the_next_export(
    settings: Settings, db: Session, org: Organization, s3: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store_events(db, org.id, feature_events(jobs=3))
    connector = make_connector(db, org)
    died = make_run(db, connector, RunStatus.FAILED)
    add_pending_upload(db, died, "u-1")

    def refuse_abort(client: Any) -> None:
        # moto cannot be made to refuse one call: botocore's Stubber answers AbortMultipartUpload.
        stubber = Stubber(client)
        stubber.add_client_error("abort_multipart_upload", "AccessDenied", "Access Denied", 403)
        client.meta.events.register("before-call.s3.PutObject", lambda **_: stubber.activate())

    with caplog.at_level("WARNING", logger="lineage_core.export.leftovers"):
        run_id = make_run(db, connector).id
        run_export(settings, run_id, clients=HookedClients(settings, refuse_abort))

    assert run_of(db, run_id).status is RunStatus.SUCCEEDED  # the new file is in place all the same
    assert pending_upload_ids(db, died.id) == ["u-1"]
    assert f"could not abort the pending upload of export run {died.id}: AccessDenied" in caplog.text
