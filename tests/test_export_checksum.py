"""The export object a reader can check without reading it: S3's full-object CRC64NVME checksum, the
user metadata, the event-count tag, and what the run records.

What moto 5.2.5 does with full-object checksums (measured with the pinned botocore 1.44.8):

* CreateMultipartUpload accepts ``ChecksumAlgorithm=CRC64NVME, ChecksumType=FULL_OBJECT`` and echoes them.
* UploadPart and CompleteMultipartUpload return no checksum, and Complete does **not** verify the one
  it is given: a wrong value completes all the same.
* After a multipart upload, HeadObject and GetObject (``ChecksumMode=ENABLED``) and GetObjectAttributes
  return ``ChecksumCRC64NVME`` and ``ChecksumType: FULL_OBJECT`` that moto computes itself from the
  stored data, so comparing them with ours checks our value against an independent computation.
* After a PutObject, moto stores the checksum it was sent without checking it, and returns no
  ``ChecksumType``. There the independent check is the reader's own CRC of the downloaded bytes.

So the mismatch on Complete, which moto cannot produce, is botocore's Stubber answering
CompleteMultipartUpload as S3 does (400 ``BadDigest``); every other request goes to moto.
"""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import orjson
import pytest
from botocore.stub import ANY, Stubber
from sqlalchemy import update
from sqlalchemy.orm import Session

from lineage_core.export import checksum
from lineage_core.export.events import format_event_time
from lineage_core.export.lease import Completing
from lineage_core.export.object_metadata import export_metadata
from lineage_core.export.run import TransientExportError, run_export
from lineage_core.export.s3_stream import MIN_PART_SIZE, S3Target, S3UploadError, upload_stream
from lineage_core.infra.config import Settings
from lineage_core.infra.models import ExportRun, Organization, RunStatus, UploadState, utcnow
from tests.factories import (
    BUCKET,
    KEY,
    PREVIOUS,
    ROLE_ARN,
    make_connector,
    make_run,
    padded_events,
    store_events,
)
from tests.readback import body, run_of
from tests.services import pending_uploads
from tests.test_export_job import HookedClients
from tests.uploads import uploads_of

PART = MIN_PART_SIZE


def _lines(total: int, line: int = 64 * 1024) -> list[bytes]:
    """``total`` bytes in ``line``-sized chunks whose content depends on their position."""
    return [
        (b"%08d" % index * (line // 8 + 1))[: min(line, total - start)]
        for index, start in enumerate(range(0, total, line))
    ]


def _object_checksums(s3: Any, key: str = KEY) -> tuple[str, str, str | None]:
    """(HeadObject's, GetObjectAttributes', HeadObject's ChecksumType) with checksum mode on."""
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    attributes = s3.get_object_attributes(Bucket=BUCKET, Key=key, ObjectAttributes=["Checksum"])
    return head["ChecksumCRC64NVME"], attributes["Checksum"]["ChecksumCRC64NVME"], head.get("ChecksumType")


def _event_count_tag(s3: Any, key: str = KEY) -> str | None:
    """The object's event-count tag, read as the customer's account (the connector's role's).

    moto keeps object tags per calling account (its tagger is per account, its buckets are not): the
    export tags as the assumed role of the customer's account, so that is where the tag is read.
    """
    endpoint = s3.meta.endpoint_url
    sts = boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1")
    credentials = sts.assume_role(RoleArn=ROLE_ARN, RoleSessionName="reader")["Credentials"]
    customer = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    tags = {tag["Key"]: tag["Value"] for tag in customer.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]}
    return tags.get("event-count")


# The stream ----------------------------------------------------------------------------------------------


def test_a_multipart_object_carries_the_checksum_a_reader_computes(s3: Any) -> None:
    chunks = _lines(2 * PART + 12345)
    target = S3Target(BUCKET, KEY, metadata={"snapshot-time": "2026-12-01T02:00:00.000Z"})

    result = upload_stream(s3, target, iter(chunks), part_size=PART, upload_threads=2)

    read_back = body(s3)
    assert read_back == b"".join(chunks) and result.parts == 3
    # moto computed its value from the parts it stored: an independent check of the combined CRC.
    assert _object_checksums(s3) == (
        checksum.encoded_crc(read_back),
        result.checksum_crc64nvme,
        "FULL_OBJECT",
    )
    assert result.checksum_crc64nvme == checksum.encoded_crc(read_back)
    head = s3.head_object(Bucket=BUCKET, Key=KEY)
    assert head["Metadata"] == {"snapshot-time": "2026-12-01T02:00:00.000Z"}


@pytest.mark.parametrize("chunks", [[b'{"a":1}\n', b'{"b":2}\n'], []], ids=["small", "empty"])
def test_a_single_put_carries_the_checksum_a_reader_computes(s3: Any, chunks: list[bytes]) -> None:
    result = upload_stream(
        s3, S3Target(BUCKET, KEY, metadata={"export-run": "7"}), iter(chunks), part_size=PART
    )

    read_back = body(s3)
    # moto stores what PutObject sent: the reader's own CRC of the bytes is the independent check.
    head, attributes, _type = _object_checksums(s3)
    assert head == attributes == result.checksum_crc64nvme == checksum.encoded_crc(read_back)
    assert s3.head_object(Bucket=BUCKET, Key=KEY)["Metadata"] == {"export-run": "7"}


def test_every_request_carries_the_checksum_s3_verifies(s3: Any) -> None:
    sent: list[tuple[str, dict[str, str]]] = []

    def record(request: Any, **_: Any) -> None:
        headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        checksums = {k: v for k, v in headers.items() if k.startswith("x-amz-checksum")}
        query = parse_qs(urlsplit(request.url).query, keep_blank_values=True)
        sent.append((query.get("partNumber", [""])[0], checksums))

    s3.meta.events.register("before-send.s3", record)
    data = b"".join(_lines(PART + 777))
    result = upload_stream(s3, S3Target(BUCKET, KEY), iter([data[:PART], data[PART:]]), part_size=PART)
    s3.meta.events.unregister("before-send.s3", record)

    create, *parts, complete = sent  # the two parts go from two threads, in either order
    first, second = sorted(parts)
    assert create[1] == {"x-amz-checksum-algorithm": "CRC64NVME", "x-amz-checksum-type": "FULL_OBJECT"}
    assert first[1] == {"x-amz-checksum-crc64nvme": checksum.encoded_crc(data[:PART])}
    assert second[1] == {"x-amz-checksum-crc64nvme": checksum.encoded_crc(data[PART:])}
    assert complete[1] == {
        "x-amz-checksum-crc64nvme": checksum.encoded_crc(data),
        "x-amz-checksum-type": "FULL_OBJECT",
    }
    assert result.checksum_crc64nvme == checksum.encoded_crc(data)


def test_a_checksum_mismatch_on_complete_aborts_the_upload() -> None:
    """moto's Complete does not verify the checksum: botocore's Stubber answers as S3 does."""
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    data = b"x" * PART + b"y" * 10
    with Stubber(client) as stubber:
        stubber.add_response(
            "create_multipart_upload",
            {"UploadId": "u-1"},
            {
                "Bucket": BUCKET,
                "Key": KEY,
                "ContentType": ANY,
                "ChecksumAlgorithm": "CRC64NVME",
                "ChecksumType": "FULL_OBJECT",
            },
        )
        for number in (1, 2):
            stubber.add_response("upload_part", {"ETag": f'"e{number}"'})
        stubber.add_client_error(
            "complete_multipart_upload",
            "BadDigest",
            "The CRC64NVME you specified did not match the calculated checksum.",
            400,
            expected_params={
                "Bucket": BUCKET,
                "Key": KEY,
                "UploadId": "u-1",
                "MultipartUpload": ANY,
                "ChecksumCRC64NVME": checksum.encoded_crc(data),
                "ChecksumType": "FULL_OBJECT",
            },
        )
        stubber.add_response("abort_multipart_upload", {}, {"Bucket": BUCKET, "Key": KEY, "UploadId": "u-1"})

        with pytest.raises(S3UploadError) as caught:
            upload_stream(client, S3Target(BUCKET, KEY), iter([data[:PART], data[PART:]]), part_size=PART)

        stubber.assert_no_pending_responses()  # the abort was sent
    assert caught.value.operation == "CompleteMultipartUpload"


# The run -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sql_bytes", [100, 250_000], ids=["one-put", "multipart"])
def test_the_run_records_the_checksum_and_the_object_says_what_it_is(
    settings: Settings, db: Session, org: Organization, s3: Any, sql_bytes: int
) -> None:
    store_events(db, org.id, padded_events(jobs=40, sql_bytes=sql_bytes))
    connector = make_connector(db, org)
    run_id = make_run(db, connector).id

    result = run_export(settings, run_id, part_size=PART)

    data = body(s3)
    lines = data.splitlines()
    run = run_of(db, run_id)
    assert run.status is RunStatus.SUCCEEDED and run.started_at is not None
    assert result is not None and (result.bytes > PART) == (sql_bytes > 1000)
    reader = checksum.encoded_crc(data)
    head, attributes, _type = _object_checksums(s3)
    assert run.checksum_crc64nvme == result.checksum_crc64nvme == head == attributes == reader
    assert run.tagging_error is None
    metadata = s3.head_object(Bucket=BUCKET, Key=KEY)["Metadata"]
    assert metadata == {
        "snapshot-time": format_event_time(run.started_at),
        "export-run": str(run_id),
        "product-version": importlib.metadata.version("openlineage-s3-export"),
    }
    assert {orjson.loads(line)["eventTime"] for line in lines} == {metadata["snapshot-time"]}
    assert _event_count_tag(s3) == str(run.events) == str(len(lines))


def test_a_checksum_mismatch_on_complete_fails_the_run_and_leaves_no_new_object(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    store_events(db, org.id, padded_events(jobs=40, sql_bytes=250_000))
    connector = make_connector(db, org)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=PREVIOUS)

    def refuse_complete(client: Any) -> None:
        # moto's Complete accepts any checksum: botocore's Stubber answers Complete as S3 does, and
        # steps aside for the abort, which goes to moto.
        stubber = Stubber(client)
        stubber.add_client_error(
            "complete_multipart_upload",
            "BadDigest",
            "The CRC64NVME you specified did not match the calculated checksum.",
            400,
        )
        client.meta.events.register(
            "provide-client-params.s3.CompleteMultipartUpload", lambda **_: stubber.activate()
        )
        client.meta.events.register(
            "provide-client-params.s3.AbortMultipartUpload", lambda **_: stubber.deactivate()
        )

    run_id = make_run(db, connector).id
    with pytest.raises(TransientExportError) as caught:
        run_export(settings, run_id, clients=HookedClients(settings, refuse_complete), part_size=PART)

    message = (
        "Could not write to s3://acme-lineage/foundational/openlineage/openlineage-events.jsonl: S3 refused "
        "the file because its CRC64NVME checksum did not match the data S3 received "
        "(CompleteMultipartUpload, BadDigest): the data was damaged on the way. "
        "The previous export file is unchanged. Foundational retries the export automatically."
    )
    assert str(caught.value) == message
    run = run_of(db, run_id)
    assert (run.status, run.error, run.checksum_crc64nvme) == (RunStatus.FAILED, message, None)
    assert body(s3) == PREVIOUS  # no new object: the previous file is still the one readers get
    assert pending_uploads(s3, BUCKET) == []
    assert list(uploads_of(db, run_id).values()) == [UploadState.ABORTED]


def test_a_role_without_tagging_keeps_the_file_and_says_why_the_tag_is_missing(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    store_events(db, org.id, padded_events(jobs=3, sql_bytes=100))
    connector = make_connector(db, org)

    def refuse_tagging(client: Any) -> None:
        # A role deployed before the template allowed s3:PutObjectTagging (tests/test_role_permissions.py
        # shows moto refusing it to a role without the permission); the Stubber answers only this call.
        stubber = Stubber(client)
        stubber.add_client_error("put_object_tagging", "AccessDenied", "Access Denied", 403)
        client.meta.events.register(
            "provide-client-params.s3.PutObjectTagging", lambda **_: stubber.activate()
        )
        client.meta.events.register("after-call.s3.PutObjectTagging", lambda **_: stubber.deactivate())

    run_id = make_run(db, connector).id
    run_export(settings, run_id, clients=HookedClients(settings, refuse_tagging))

    run = run_of(db, run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert run.checksum_crc64nvme == checksum.encoded_crc(body(s3))
    assert run.tagging_error == (
        "The file is in place and its checksum verified, but its event-count tag is not set: the role "
        "does not allow s3:PutObjectTagging. Update the CloudFormation stack (or Terraform module) with "
        "the current template to allow it."
    )
    assert _event_count_tag(s3) is None


# Recovery: the earlier attempt's Complete went through, its record did not ----------------------------------


def _earlier_attempt(db: Session, connector: Any, completing: Completing) -> int:
    """A run whose attempt died after its Complete step was noted: running, lease expired."""
    past = utcnow().replace(year=2020)
    return make_run(
        db,
        connector,
        RunStatus.RUNNING,
        started_at=past,
        lease_owner=completing.owner,
        lease_expires_at=past,
        completing=completing.to_json(),
    ).id


def _completing(data: bytes, **overrides: Any) -> Completing:
    values: dict[str, Any] = {
        "owner": "host:1:gone",
        "etag": None,
        "events": len(data.splitlines()),
        "bytes": len(data),
        "trimmed": 0,
        "omitted": 0,
        "upload_id": None,
        "checksum": checksum.encoded_crc(data),
        **overrides,
    }
    return Completing(**values)


def _put_as_export(s3: Any, data: bytes, run_id: int, **arguments: Any) -> None:
    s3.put_object(
        Bucket=BUCKET,
        Key=KEY,
        Body=data,
        Metadata=export_metadata(run_id, utcnow()),
        ChecksumAlgorithm="CRC64NVME",
        ChecksumCRC64NVME=checksum.encoded_crc(data),
        **arguments,
    )


def test_recovery_recognises_the_earlier_attempts_file_by_its_checksum_and_tags_it(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    connector = make_connector(db, org)
    data = b'{"eventType":"COMPLETE","n":1}\n{"eventType":"COMPLETE","n":2}\n'
    # Under SSE-KMS the ETag of a single PutObject cannot be foreseen: the checksum recognises the file.
    run_id = _earlier_attempt(db, connector, _completing(data, etag=None))
    _put_as_export(s3, data, run_id)

    result = run_export(settings, run_id)

    run = run_of(db, run_id)
    assert result is not None and run.status is RunStatus.SUCCEEDED
    assert body(s3) == data  # recorded, not exported again
    assert run.checksum_crc64nvme == checksum.encoded_crc(data) and run.events == 2
    assert _event_count_tag(s3) == "2"  # the attempt died before it tagged; the recovery did


def test_recovery_does_not_take_another_runs_identical_file_for_its_own(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    """An organization without lineage exports an empty file every time, with one checksum and ETag."""
    connector = make_connector(db, org)
    earlier = make_run(db, connector, RunStatus.SUCCEEDED, finished_at=utcnow())
    _put_as_export(s3, b"", earlier.id)
    empty_etag = s3.head_object(Bucket=BUCKET, Key=KEY)["ETag"]
    run_id = _earlier_attempt(db, connector, _completing(b"", etag=empty_etag))

    run_export(settings, run_id)

    # Exported again: the object now names this run, and the run its own figures.
    assert s3.head_object(Bucket=BUCKET, Key=KEY)["Metadata"]["export-run"] == str(run_id)
    run = run_of(db, run_id)
    assert (run.status, run.events, run.checksum_crc64nvme) == (
        RunStatus.SUCCEEDED,
        0,
        checksum.encoded_crc(b""),
    )


def test_recovery_of_a_record_written_before_checksums_were_kept_goes_by_the_etag(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    connector = make_connector(db, org)
    data = b'{"eventType":"COMPLETE"}\n'
    run_id = make_run(db, connector).id
    _put_as_export(s3, data, run_id)
    etag = s3.head_object(Bucket=BUCKET, Key=KEY)["ETag"]
    old_record = json.loads(_completing(data, etag=etag).to_json())
    del old_record["checksum"]
    past = utcnow().replace(year=2020)
    db.execute(
        update(ExportRun)
        .where(ExportRun.id == run_id)
        .values(
            status=RunStatus.RUNNING,
            started_at=past,
            lease_owner="host:1:gone",
            lease_expires_at=past,
            completing=json.dumps(old_record),
        )
    )
    db.commit()

    run_export(settings, run_id)

    run = run_of(db, run_id)
    assert run.status is RunStatus.SUCCEEDED and body(s3) == data
    assert run.etag == etag and run.checksum_crc64nvme == checksum.encoded_crc(data)  # read from the head
