"""Streaming bytes into one S3 object that appears whole or not at all.

:func:`upload_stream` consumes an iterable of byte chunks (the export's NDJSON lines) and writes them to
``s3://bucket/key`` through one multipart upload:

* Chunks are buffered into parts of at least ``part_size`` bytes (S3 wants every part but the last to
  be at least 5 MiB). Full parts go to a small pool of upload threads while the caller's generator keeps
  producing the next part, so generation and upload overlap. At most ``upload_threads + 1`` parts are
  held at once (the one being filled plus those being sent): memory stays flat whatever the object's size.
* Parts are small by default (S3's minimum, 5 MiB): the last part is the one upload nothing overlaps,
  so a small part keeps the wait after generation short. S3 allows 10,000 parts, so the part size
  doubles after every 1,000 parts (:func:`part_size_of`): 5 MiB parts up to about 5 GB, and objects up
  to 4.8 TiB (S3's limit is 5 TiB) with the last parts 2.5 GiB. Memory grows with the part size, so
  only past about 5 GB, far beyond today's largest exports.
* S3 makes the object visible only when the upload completes, so readers see the previous object or
  the new one, never a partial file. On **any** failure, in the generator or in S3, and including
  ``KeyboardInterrupt``/``SystemExit`` (RQ's job timeout and shutdown paths), the upload threads are
  stopped and the multipart upload is aborted before the error propagates: nothing is left pending and
  the previous object is untouched. A killed process (SIGKILL) cannot abort; its upload stays pending
  and invisible until someone aborts it: the caller learns the UploadId first (``on_upload_started``)
  so that it can be recorded, and a bucket lifecycle rule (AbortIncompleteMultipartUpload) is the
  backstop.
* A body shorter than one part (an empty file included) is sent with a single PutObject, which is
  just as atomic and costs one request instead of three.
* The object gets a **full-object CRC64NVME checksum** (:mod:`lineage_core.export.checksum`) that S3
  verifies before it makes the object visible: each part carries its own CRC (computed by the thread
  that sends it), and CompleteMultipartUpload carries the whole object's, combined from the parts'
  without reading the data again (PutObject carries the body's). A mismatch is refused by S3
  (``BadDigest``), which fails the upload like any other error: it is aborted and nothing is left.
  The checksum is on the returned :class:`UploadedObject`, and readers get it from HeadObject or
  GetObjectAttributes.

Every request carries the same ContentType and, when a KMS key is given, SSE-KMS with that key; the
object's user metadata (``x-amz-meta-*``) is the target's, fixed when the upload starts.
S3 errors are raised as :class:`S3UploadError`, naming the operation that failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.export import checksum

MIB = 1024 * 1024
MIN_PART_SIZE = 5 * MIB  # S3's minimum for every part but the last
DEFAULT_PART_SIZE = MIN_PART_SIZE
MAX_PARTS = 10_000  # S3's limit per multipart upload
PARTS_PER_SIZE = 1_000  # the part size doubles after every this many parts
DEFAULT_UPLOAD_THREADS = 3
NDJSON_CONTENT_TYPE = "application/x-ndjson"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class S3Target:
    """Where the object goes and how it is stored."""

    bucket: str
    key: str
    content_type: str = NDJSON_CONTENT_TYPE
    kms_key_arn: str | None = None
    # User metadata (x-amz-meta-<name>), lower-case ASCII names: S3 fixes it when the upload starts.
    metadata: dict[str, str] = field(default_factory=dict, hash=False)

    def object_arguments(self) -> dict[str, Any]:
        """The arguments PutObject and CreateMultipartUpload share."""
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key, "ContentType": self.content_type}
        if self.kms_key_arn:
            arguments |= {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.kms_key_arn}
        if self.metadata:
            arguments["Metadata"] = dict(self.metadata)
        return arguments


@dataclass(frozen=True)
class UploadedObject:
    """The object S3 now serves at the target key."""

    size: int
    etag: str
    version_id: str | None  # None unless the bucket has versioning enabled
    parts: int  # 0 when the body went in one PutObject
    checksum_crc64nvme: str  # the full object's CRC64NVME, base64, as S3 verified and stores it


class S3UploadError(Exception):
    """An S3 request of the upload failed. ``operation`` is its name; ``__cause__`` is botocore's error."""

    def __init__(self, operation: str, error: BaseException) -> None:
        super().__init__(f"{operation} failed: {error}")
        self.operation = operation
        self.error = error


class ObjectTooLargeError(Exception):
    """The stream needs more than S3's 10,000 parts at this part size."""


def part_size_of(number: int, part_size: int) -> int:
    """The size of part ``number`` (from 1) when the first parts are ``part_size`` bytes."""
    return part_size << ((number - 1) // PARTS_PER_SIZE)


def upload_stream(
    s3: Any,
    target: S3Target,
    chunks: Iterable[bytes],
    *,
    part_size: int = DEFAULT_PART_SIZE,
    upload_threads: int = DEFAULT_UPLOAD_THREADS,
    on_upload_started: Callable[[str], None] | None = None,
) -> UploadedObject:
    """Write the concatenation of ``chunks`` to the target object, atomically.

    Args:
        s3: a boto3 S3 client with write access to the target.
        target: bucket, key, content type and optional KMS key.
        chunks: the body, in pieces of any size; consumed once, lazily.
        part_size: bytes of each of the first 1,000 parts (at least 5 MiB; then it doubles every 1,000
            parts); also the largest body sent with one PutObject.
        upload_threads: parts uploaded concurrently while the next part is being filled.
        on_upload_started: called with the UploadId once the multipart upload exists, before any part
            is sent, so the caller can record it: a process killed later cannot abort it, but whoever
            reads the record can. If it raises, the upload is aborted and the error propagates.

    Returns:
        The completed object's size, ETag, version and full-object CRC64NVME checksum.

    Raises:
        S3UploadError: an S3 request failed (botocore's error is its ``error``).
        ObjectTooLargeError: the body needs more than 10,000 parts.
        Any other exception, from ``chunks`` or from ``s3`` (not botocore's), as it was raised.
        In every case the multipart upload, if one was started, has been aborted.
    """
    if part_size < MIN_PART_SIZE:
        raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes (S3's minimum part size)")
    if upload_threads < 1:
        raise ValueError("upload_threads must be at least 1")

    buffer: list[bytes] = []
    buffered = 0
    upload: _MultipartUpload | None = None
    filling = part_size  # the size of the part being filled
    try:
        for chunk in chunks:
            buffer.append(chunk)
            buffered += len(chunk)
            if buffered >= filling:
                if upload is None:
                    upload = _MultipartUpload(s3, target, upload_threads)
                    if on_upload_started is not None:
                        on_upload_started(upload.upload_id)
                upload.send(_part(buffer))
                buffer.clear()
                buffered = 0
                filling = part_size_of(upload.parts_sent + 1, part_size)
        body = _part(buffer)
        buffer.clear()
        if upload is None:
            return _put_object(s3, target, body)
        if body:
            upload.send(body)
        return upload.complete()
    except BaseException:
        if upload is not None:
            upload.abort()
        raise


def _part(chunks: list[bytes]) -> bytearray:
    """The chunks as one body. A bytearray, not bytes, on purpose: botocore wraps a bytes body in a
    BytesIO, which the HTTP connection then writes 16 KiB at a time, taking the GIL back after each
    write. While the generator holds the GIL, that made a 5 MiB part take over a second instead of
    a tenth (measured against moto). A bytearray goes to the socket in one write."""
    return bytearray().join(chunks)


def _put_object(s3: Any, target: S3Target, body: bytearray) -> UploadedObject:
    body_checksum = checksum.encoded_crc(body)
    try:
        response = s3.put_object(
            Body=body,
            ChecksumAlgorithm=checksum.ALGORITHM,
            ChecksumCRC64NVME=body_checksum,
            **target.object_arguments(),
        )
    except (ClientError, BotoCoreError) as error:
        raise S3UploadError("PutObject", error) from error
    return UploadedObject(
        size=len(body),
        etag=response["ETag"],
        version_id=response.get("VersionId"),
        parts=0,
        checksum_crc64nvme=body_checksum,
    )


class _MultipartUpload:
    """One multipart upload with a bounded pool of part uploads in flight."""

    def __init__(self, s3: Any, target: S3Target, upload_threads: int) -> None:
        self._s3 = s3
        self._target = target
        try:
            response = s3.create_multipart_upload(
                ChecksumAlgorithm=checksum.ALGORITHM,
                ChecksumType=checksum.CHECKSUM_TYPE,
                **target.object_arguments(),
            )
        except (ClientError, BotoCoreError) as error:
            raise S3UploadError("CreateMultipartUpload", error) from error
        self._upload_id: str = response["UploadId"]
        self._executor = ThreadPoolExecutor(max_workers=upload_threads, thread_name_prefix="s3-part")
        # One slot per thread: a full part waits here instead of piling up in the executor's queue,
        # which is what keeps memory flat when generation is faster than the network.
        self._slots = threading.BoundedSemaphore(upload_threads)
        self._in_flight: set[Future[_SentPart]] = set()
        self._parts: list[_SentPart] = []
        self._next_number = 1
        self._size = 0
        self._stop = threading.Event()

    @property
    def upload_id(self) -> str:
        return self._upload_id

    @property
    def parts_sent(self) -> int:
        return self._next_number - 1

    def send(self, body: bytearray) -> None:
        """Queue the next part; blocks while every upload thread is busy. Raises the first part failure."""
        number = self._next_number
        if number > MAX_PARTS:
            raise ObjectTooLargeError(
                f"the object needs more than {MAX_PARTS} parts; raise the part size to export it"
            )
        self._slots.acquire()
        self._collect(block=False)
        self._next_number += 1
        self._size += len(body)
        future = self._executor.submit(self._upload_part, number, body)
        self._in_flight.add(future)
        future.add_done_callback(lambda _done: self._slots.release())

    def complete(self) -> UploadedObject:
        while self._in_flight:
            self._collect(block=True)
        self._executor.shutdown(wait=True)
        parts = sorted(self._parts, key=lambda part: part.number)
        # S3 computes the same value from the parts it stored and refuses the Complete if they differ.
        object_checksum = checksum.encoded(checksum.combine((part.crc, part.size) for part in parts))
        try:
            response = self._s3.complete_multipart_upload(
                Bucket=self._target.bucket,
                Key=self._target.key,
                UploadId=self._upload_id,
                MultipartUpload={"Parts": [part.completed() for part in parts]},
                ChecksumCRC64NVME=object_checksum,
                ChecksumType=checksum.CHECKSUM_TYPE,
            )
        except (ClientError, BotoCoreError) as error:
            raise S3UploadError("CompleteMultipartUpload", error) from error
        return UploadedObject(
            size=self._size,
            etag=response["ETag"],
            version_id=response.get("VersionId"),
            parts=len(parts),
            checksum_crc64nvme=object_checksum,
        )

    def abort(self) -> None:
        """Stop the part uploads and abort the upload. Never raises: the caller's error is the one to see."""
        self._stop.set()
        # Parts not started yet are dropped; parts being sent finish their one request first, since S3
        # may keep a part that lands after the abort (its docs say to abort after in-flight parts end).
        self._executor.shutdown(wait=True, cancel_futures=True)
        try:
            self._s3.abort_multipart_upload(
                Bucket=self._target.bucket, Key=self._target.key, UploadId=self._upload_id
            )
        except (ClientError, BotoCoreError) as error:
            # The upload stays invisible to readers; a lifecycle rule or the next attempt cleans it up.
            logger.warning(
                "could not abort the multipart upload of s3://%s/%s: %s",
                self._target.bucket,
                self._target.key,
                error,
            )
        except BaseException:
            logger.warning("interrupted while aborting the multipart upload of s3://%s", self._target.bucket)
            raise

    def _collect(self, *, block: bool) -> None:
        """Record finished parts; re-raise the first failure."""
        if not self._in_flight:
            return
        done, _pending = wait(self._in_flight, timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in done:
            self._in_flight.discard(future)
            self._parts.append(future.result())

    def _upload_part(self, number: int, body: bytearray) -> _SentPart:
        if self._stop.is_set():
            raise S3UploadError("UploadPart", RuntimeError("the upload was aborted"))
        # Computed here, in the upload thread, so the generator's thread never waits for it.
        part_crc = checksum.crc(body)
        arguments: dict[str, Any] = {
            "Bucket": self._target.bucket,
            "Key": self._target.key,
            "UploadId": self._upload_id,
            "PartNumber": number,
            "Body": body,
            # An upload created with a checksum algorithm needs each part's checksum of that algorithm;
            # given, botocore sends it as it is instead of computing its own.
            "ChecksumAlgorithm": checksum.ALGORITHM,
            "ChecksumCRC64NVME": checksum.encoded(part_crc),
        }
        try:
            response = self._s3.upload_part(**arguments)
        except (ClientError, BotoCoreError) as error:
            raise S3UploadError("UploadPart", error) from error
        return _SentPart(number=number, etag=response["ETag"], crc=part_crc, size=len(body))


@dataclass(frozen=True)
class _SentPart:
    """A part S3 stored: what CompleteMultipartUpload lists, and what the object's checksum combines."""

    number: int
    etag: str
    crc: int
    size: int

    def completed(self) -> dict[str, Any]:
        return {"PartNumber": self.number, "ETag": self.etag, "ChecksumCRC64NVME": checksum.encoded(self.crc)}


__all__ = [
    "DEFAULT_PART_SIZE",
    "MIN_PART_SIZE",
    "NDJSON_CONTENT_TYPE",
    "ObjectTooLargeError",
    "S3Target",
    "S3UploadError",
    "UploadedObject",
    "upload_stream",
]
