"""A running export's lease: liveness kept in the database, not in Redis.

A run that an attempt claims gets ``lease_owner`` (this attempt's token) and ``lease_expires_at``. While
the attempt works, :class:`LeaseKeeper` (a thread in the work-horse) renews the lease every
:data:`RENEW_SECONDS`. So whatever Redis forgets (a flush, a restart), the database tells:

* a run whose lease is live has a live attempt: the tick leaves it alone and nobody else claims it;
* a run whose lease expired has none: the tick may close it, and another attempt (RQ's retry of the
  same job, after the first one could not even requeue its run) may take it over;
* an attempt that lost its lease (taken over, or closed by the tick) stops, and above all never sends
  its Complete: :func:`confirm_before_complete` checks the lease in the database, and renews it, just
  before the Complete step, and :class:`GuardedS3` refuses to go on once the keeper saw it lost.

Times are the application's UTC clock (every process of the product runs on NTP-synchronised hosts);
the lease is long enough (:data:`LEASE_SECONDS`) that a few seconds of skew do not matter.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError

from lineage_core.infra.db import session_factory
from lineage_core.infra.models import ExportRun, RunStatus, utcnow

logger = logging.getLogger(__name__)

# How long a lease lasts unless renewed, and how often the keeper renews it: a worker may miss three
# renewals (a database blip) before anyone else may act on its run.
LEASE_SECONDS = 60
RENEW_SECONDS = 15


class LeaseLostError(Exception):
    """Another attempt took the run over, or the tick closed it: this attempt must stop, untouched."""


class LeaseUnverifiedError(Exception):
    """The database could not be asked whether this attempt still owns its run (``__cause__`` says why).

    The Complete step is then not sent: replacing the file without knowing that nobody else is writing
    it is exactly what the lease exists to prevent.
    """


def new_owner() -> str:
    """A token naming this attempt: host, process and a random part (a process runs one attempt at a time)."""
    return f"{socket.gethostname()[:100]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def lease_until() -> datetime:
    return utcnow() + timedelta(seconds=LEASE_SECONDS)


@dataclass(frozen=True)
class Completing:
    """What an attempt's Complete step is about to put in place, recorded just before it is sent."""

    owner: str
    etag: str | None  # the ETag S3 gives the object if this Complete goes through (None: unknown)
    events: int
    bytes: int
    trimmed: int
    omitted: int
    upload_id: str | None  # None for a body sent with one PutObject
    # The object's full-object CRC64NVME (base64) if the step goes through; None in a record written
    # before checksums were kept.
    checksum: str | None = None

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Completing:
        return cls(**json.loads(text))


def renew(database_url: str, run_id: int, owner: str) -> bool:
    """Extend the lease if ``owner`` still holds it. Returns False when it does not (lost)."""
    with session_factory(database_url)() as session:
        renewed = session.execute(
            update(ExportRun)
            .where(
                ExportRun.id == run_id, ExportRun.status == RunStatus.RUNNING, ExportRun.lease_owner == owner
            )
            .values(lease_expires_at=lease_until())
            .returning(ExportRun.id)
        ).scalar_one_or_none()
        session.commit()
        return renewed is not None


def confirm_before_complete(database_url: str, run_id: int, completing: Completing) -> None:
    """Check in the database that the attempt still owns the run, renew its lease and record what the
    Complete step is about to do, in one transaction.

    Raises:
        LeaseLostError: the run belongs to someone else now (or was closed).
        LeaseUnverifiedError: the database did not answer.
    """
    try:
        with session_factory(database_url)() as session:
            confirmed = session.execute(
                update(ExportRun)
                .where(
                    ExportRun.id == run_id,
                    ExportRun.status == RunStatus.RUNNING,
                    ExportRun.lease_owner == completing.owner,
                )
                .values(lease_expires_at=lease_until(), completing=completing.to_json())
                .returning(ExportRun.id)
            ).scalar_one_or_none()
            session.commit()
    except SQLAlchemyError as error:
        raise LeaseUnverifiedError(type(error).__name__) from error
    if confirmed is None:
        raise LeaseLostError(f"export run {run_id} is no longer held by this attempt")


class LeaseKeeper:
    """Renews a run's lease every :data:`RENEW_SECONDS` from a daemon thread, until :meth:`stop`.

    A renewal that fails on a database error is logged and tried again at the next beat (the lease
    lasts several beats); a renewal that finds the lease gone sets :attr:`lost`.
    """

    def __init__(self, database_url: str, run_id: int, owner: str) -> None:
        self._database_url = database_url
        self._run_id = run_id
        self._owner = owner
        self._stopped = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _beat(self) -> None:
        while not self._stopped.wait(RENEW_SECONDS):
            try:
                if not renew(self._database_url, self._run_id, self._owner):
                    logger.warning("export run %s: its lease was taken over; stopping", self._run_id)
                    self.lost.set()
                    return
            except SQLAlchemyError as error:
                logger.warning(
                    "export run %s: could not renew its lease (%s); trying again",
                    self._run_id,
                    type(error).__name__,
                )


class GuardedS3:
    """The export's S3 client, seen through its lease and its upload records.

    * Once the keeper found the lease lost, the next request raises :class:`LeaseLostError` (the upload
      then aborts, as on any failure).
    * ``CreateMultipartUpload``'s UploadId is recorded at once (``record_open``).
    * Before ``CompleteMultipartUpload`` (or the single ``PutObject`` of a small body), the lease is
      confirmed in the database and what the step will put in place is recorded (``before_complete``).
    * The outcome of Complete and Abort is recorded on the upload's row (``record_closed``).
    """

    def __init__(self, s3: Any, guard: UploadGuard) -> None:
        self._s3 = s3
        self._guard = guard
        self._sent = 0  # bytes of the parts sent (from several threads)
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def create_multipart_upload(self, **arguments: Any) -> Any:
        self._guard.check()
        response = self._s3.create_multipart_upload(**arguments)
        try:
            self._guard.record_open(response["UploadId"], arguments["Bucket"], arguments["Key"])
        except BaseException:
            # Unrecorded, nobody could ever abort it: abort it now (the upload has not begun for the
            # caller, which will not). A failure here leaves it to the bucket's lifecycle rule.
            with suppress(ClientError, BotoCoreError):
                self._s3.abort_multipart_upload(
                    Bucket=arguments["Bucket"], Key=arguments["Key"], UploadId=response["UploadId"]
                )
            raise
        return response

    def upload_part(self, **arguments: Any) -> Any:
        self._guard.check()
        response = self._s3.upload_part(**arguments)
        with self._lock:
            self._sent += len(arguments["Body"])
        return response

    def complete_multipart_upload(self, **arguments: Any) -> Any:
        parts = arguments["MultipartUpload"]["Parts"]
        etag = multipart_etag([part["ETag"] for part in parts])
        with self._lock:
            size = self._sent
        self._guard.before_complete(arguments["UploadId"], etag, size, arguments.get("ChecksumCRC64NVME"))
        response = self._s3.complete_multipart_upload(**arguments)
        self._guard.record_closed(arguments["UploadId"], completed=True)
        return response

    def put_object(self, **arguments: Any) -> Any:
        body = arguments["Body"]
        etag = None if arguments.get("SSEKMSKeyId") else _md5_etag(bytes(body))
        self._guard.before_complete(None, etag, len(body), arguments.get("ChecksumCRC64NVME"))
        return self._s3.put_object(**arguments)

    def abort_multipart_upload(self, **arguments: Any) -> Any:
        response = self._s3.abort_multipart_upload(**arguments)
        self._guard.record_closed(arguments["UploadId"], completed=False)
        return response


class UploadGuard(Protocol):
    """What :class:`GuardedS3` calls into; implemented by the export run (lineage_core.export.run)."""

    def check(self) -> None: ...

    def record_open(self, upload_id: str, bucket: str, key: str) -> None: ...

    def before_complete(
        self, upload_id: str | None, etag: str | None, size: int, checksum: str | None
    ) -> None: ...

    def record_closed(self, upload_id: str, *, completed: bool) -> None: ...


def _md5_etag(body: bytes) -> str:
    import hashlib

    return f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'


def multipart_etag(part_etags: list[str]) -> str | None:
    """The ETag S3 gives a completed multipart object: the MD5 of the parts' binary MD5s, dash, count.

    None when a part's ETag is not a plain MD5 (S3 does not promise one under SSE-KMS): then the
    object's ETag cannot be foreseen, and a later attempt simply exports again.
    """
    import hashlib

    digests = []
    for etag in part_etags:
        text = etag.strip('"')
        if len(text) != 32:
            return None
        try:
            digests.append(bytes.fromhex(text))
        except ValueError:
            return None
    combined = hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()
    return f'"{combined}-{len(part_etags)}"'
