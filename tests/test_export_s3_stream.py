"""The streaming multipart writer against the moto server over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from lineage_core.export.s3_stream import (
    MIN_PART_SIZE,
    NDJSON_CONTENT_TYPE,
    S3Target,
    S3UploadError,
    part_size_of,
    upload_stream,
)
from tests.services import fail_upload_part, pending_uploads, s3_client

BUCKET = "stream-bucket"
KEY = "lineage/openlineage-events.jsonl"
PART = MIN_PART_SIZE
PREVIOUS = b'{"previous":"snapshot"}\n' * 1000


@pytest.fixture
def s3(aws: str) -> Any:
    client = s3_client(aws)
    client.create_bucket(Bucket=BUCKET)
    return client


def lines(total: int, line: int = 64 * 1024) -> Iterator[bytes]:
    """``total`` bytes in ``line``-sized chunks whose content depends on their position."""
    sent = 0
    index = 0
    while sent < total:
        size = min(line, total - sent)
        yield (b"%08d" % index * (size // 8 + 1))[:size]
        sent += size
        index += 1


def body_of(s3: Any) -> bytes:
    return bytes(s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read())


def put_previous(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=PREVIOUS)


def test_small_body_is_one_put_with_the_content_type(s3: Any) -> None:
    result = upload_stream(s3, S3Target(BUCKET, KEY), [b'{"a":1}\n', b'{"b":2}\n'], part_size=PART)

    assert body_of(s3) == b'{"a":1}\n{"b":2}\n'
    head = s3.head_object(Bucket=BUCKET, Key=KEY)
    assert head["ContentType"] == NDJSON_CONTENT_TYPE
    assert (result.size, result.parts, result.etag) == (16, 0, head["ETag"])


def test_empty_body_is_a_zero_byte_object(s3: Any) -> None:
    put_previous(s3)

    result = upload_stream(s3, S3Target(BUCKET, KEY), iter(()), part_size=PART)

    assert body_of(s3) == b""
    assert result.size == 0
    assert s3.head_object(Bucket=BUCKET, Key=KEY)["ContentLength"] == 0


def test_large_body_goes_through_a_multipart_upload_in_order(s3: Any) -> None:
    total = 2 * PART + 12345
    expected = b"".join(lines(total))

    result = upload_stream(s3, S3Target(BUCKET, KEY), lines(total), part_size=PART, upload_threads=3)

    assert body_of(s3) == expected
    head = s3.head_object(Bucket=BUCKET, Key=KEY)
    assert head["ContentType"] == NDJSON_CONTENT_TYPE
    assert head["ContentLength"] == total
    assert result.etag == head["ETag"]
    assert head["ETag"].endswith('-3"')  # S3's multipart ETag: "<md5 of part md5s>-<number of parts>"
    assert (result.size, result.parts) == (total, 3)
    assert pending_uploads(s3, BUCKET) == []


def test_versioned_bucket_reports_the_new_version(s3: Any) -> None:
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})

    small = upload_stream(s3, S3Target(BUCKET, KEY), [b"x\n"], part_size=PART)
    large = upload_stream(s3, S3Target(BUCKET, KEY), lines(PART + 10), part_size=PART)

    versions = s3.list_object_versions(Bucket=BUCKET, Prefix=KEY)["Versions"]
    assert {v["VersionId"] for v in versions} == {small.version_id, large.version_id}
    assert s3.head_object(Bucket=BUCKET, Key=KEY)["VersionId"] == large.version_id


@pytest.mark.parametrize("total", [100, PART + 100], ids=["put", "multipart"])
def test_kms_key_is_used_for_the_object(aws: str, s3: Any, total: int) -> None:
    kms = boto3.client("kms", endpoint_url=aws, region_name="us-east-1")
    key_arn = kms.create_key()["KeyMetadata"]["Arn"]

    upload_stream(s3, S3Target(BUCKET, KEY, kms_key_arn=key_arn), lines(total), part_size=PART)

    head = s3.head_object(Bucket=BUCKET, Key=KEY)
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"] == key_arn


def test_failed_part_aborts_and_leaves_the_previous_object(s3: Any) -> None:
    put_previous(s3)
    sent = fail_upload_part(s3, part_number=2)

    with pytest.raises(S3UploadError, match="UploadPart failed") as raised:
        upload_stream(s3, S3Target(BUCKET, KEY), lines(4 * PART), part_size=PART, upload_threads=1)

    assert raised.value.operation == "UploadPart"
    assert 2 in sent and 4 not in sent  # it failed in the middle, and stopped sending parts after that
    assert body_of(s3) == PREVIOUS
    assert pending_uploads(s3, BUCKET) == []


@pytest.mark.parametrize("error", [RuntimeError("database went away"), KeyboardInterrupt()])
def test_generator_failure_aborts_and_propagates(s3: Any, error: BaseException) -> None:
    put_previous(s3)

    def failing() -> Iterator[bytes]:
        yield from lines(2 * PART + 1)  # two parts are on their way when the generator fails
        raise error

    with pytest.raises(type(error)):
        upload_stream(s3, S3Target(BUCKET, KEY), failing(), part_size=PART)

    assert body_of(s3) == PREVIOUS
    assert pending_uploads(s3, BUCKET) == []


def test_missing_bucket_is_an_upload_error(s3: Any) -> None:
    with pytest.raises(S3UploadError, match="PutObject failed") as raised:
        upload_stream(s3, S3Target("no-such-bucket", KEY), [b"x\n"], part_size=PART)
    assert raised.value.error.response["Error"]["Code"] == "NoSuchBucket"


def test_upload_overlaps_generation_with_bounded_buffering(s3: Any) -> None:
    """Parts are sent while the generator still runs, and it is held back when every thread is busy."""
    threads = 2
    first_part_stored = threading.Event()
    uploaded = 0
    lock = threading.Lock()

    def after_part(**_kwargs: Any) -> None:
        nonlocal uploaded
        with lock:
            uploaded += PART  # every part is exactly PART bytes: the chunks divide it evenly
        first_part_stored.set()

    s3.meta.events.register("after-call.s3.UploadPart", after_part)
    produced = 0
    most_ahead = 0

    def generator() -> Iterator[bytes]:
        nonlocal produced, most_ahead
        for index, chunk in enumerate(lines(6 * PART)):
            if index * len(chunk) == 2 * PART:
                # Not one more byte until part 1 is stored in S3: the upload runs under the generator.
                assert first_part_stored.wait(timeout=60), "no part was uploaded while generating"
            yield chunk
            produced += len(chunk)
            with lock:
                most_ahead = max(most_ahead, produced - uploaded)

    upload_stream(s3, S3Target(BUCKET, KEY), generator(), part_size=PART, upload_threads=threads)

    assert body_of(s3) == b"".join(lines(6 * PART))
    # Held: one part per busy thread, the part being filled, and one chunk of slack.
    assert most_ahead <= (threads + 1) * PART + 64 * 1024


def test_part_size_below_the_s3_minimum_is_refused(s3: Any) -> None:
    with pytest.raises(ValueError, match="at least"):
        upload_stream(s3, S3Target(BUCKET, KEY), [b"x"], part_size=MIN_PART_SIZE - 1)


def test_parts_grow_so_that_s3s_part_limit_allows_very_large_objects(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [part_size_of(n, PART) // PART for n in (1, 1000, 1001, 2001, 10_000)] == [1, 1, 2, 4, 512]
    # 10,000 parts then hold 4.8 TiB, nearly S3's largest object (5 TiB).
    assert sum(part_size_of(n, PART) for n in range(1, 10_001)) > 4.8 * 1024**4

    monkeypatch.setattr(
        "lineage_core.export.s3_stream.PARTS_PER_SIZE", 2
    )  # doubling every 2 parts, not 1,000
    # Parts go up from several threads, so they are put back in order by number.
    sizes: dict[int, int] = {}
    s3.meta.events.register(
        "provide-client-params.s3.UploadPart",
        lambda params, **_: sizes.__setitem__(params["PartNumber"], len(params["Body"])),
    )
    result = upload_stream(s3, S3Target(BUCKET, KEY), lines(7 * PART), part_size=PART)

    assert [sizes[number] // PART for number in sorted(sizes)] == [1, 1, 2, 2, 1]
    assert (result.parts, result.size) == (5, 7 * PART)
    assert body_of(s3) == b"".join(lines(7 * PART))


def test_every_body_reaches_the_connection_in_one_piece(s3: Any) -> None:
    # A file-like body is written 16 KiB at a time, each write waiting for the GIL that the generator
    # holds; a bytes-like body goes out in one write. Checked where botocore hands the request over.
    bodies: list[Any] = []
    s3.meta.events.register("before-send.s3.*", lambda request, **_: bodies.append(request.body))

    upload_stream(s3, S3Target(BUCKET, KEY), lines(2 * PART + 10), part_size=PART)  # 3 parts
    upload_stream(s3, S3Target(BUCKET, KEY), [b"small\n"], part_size=PART)  # one PutObject

    sent = [body for body in bodies if body]  # create and complete have small XML bodies or none
    assert sum(len(body) for body in sent if not isinstance(body, bytes)) == 2 * PART + 10 + 6
    assert not any(hasattr(body, "read") for body in sent)


def test_the_caller_learns_the_upload_id_before_any_part_is_sent(s3: Any) -> None:
    parts: list[int] = []
    s3.meta.events.register("provide-client-params.s3.UploadPart", lambda params, **_: parts.append(1))
    seen: list[tuple[str, list[str], int]] = []

    def started(upload_id: str) -> None:
        seen.append((upload_id, [u["UploadId"] for u in pending_uploads(s3, BUCKET)], len(parts)))

    upload_stream(s3, S3Target(BUCKET, KEY), lines(2 * PART), part_size=PART, on_upload_started=started)

    ((upload_id, pending_then, parts_then),) = seen
    assert (pending_then, parts_then) == ([upload_id], 0)
    assert len(parts) == 2 and pending_uploads(s3, BUCKET) == []


def test_a_failing_upload_started_hook_aborts_the_upload(s3: Any) -> None:
    put_previous(s3)

    def cannot_record(_upload_id: str) -> None:
        raise RuntimeError("the database is gone")

    with pytest.raises(RuntimeError, match="the database is gone"):
        upload_stream(
            s3, S3Target(BUCKET, KEY), lines(2 * PART), part_size=PART, on_upload_started=cannot_record
        )

    assert pending_uploads(s3, BUCKET) == []
    assert body_of(s3) == PREVIOUS
