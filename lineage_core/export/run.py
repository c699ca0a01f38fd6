"""Run one export: the org's current lineage, as OpenLineage NDJSON, into the connector's bucket.

:func:`run_export` is what the RQ job ``worker.jobs.export_connector(run_id)`` does:

1. The run is claimed under a lease (:mod:`lineage_core.export.runs`, :mod:`lineage_core.export.lease`):
   a ``queued`` run, or a ``running`` one whose lease expired (RQ's retry taking over its own run); any
   other run is left alone. The lease is renewed from a thread while the export works.
2. The snapshot: the customer's role is assumed with the connector's External ID
   (:mod:`lineage_core.export.connect`, on the side while the first part is generated); the org's
   graph is read in one consistent, read-only transaction (:mod:`lineage_core.export.snapshot`) and
   each job becomes one RunEvent line (:mod:`lineage_core.export.events`, eventTime = the run's
   ``started_at``); the lines stream into ``<prefix>/openlineage-events.jsonl`` through one multipart
   upload (:mod:`lineage_core.export.s3_stream`) that completes at the end or is aborted, so readers
   only ever see the previous complete file or the new complete file. Every upload's id is committed
   (``export_uploads``) as soon as it exists; just before the Complete step the lease is confirmed in
   the database (an attempt that lost it aborts and stops) and what the step will put in place is noted
   on the run, so that if its outcome cannot be recorded the next attempt finds it out from S3
   (:mod:`lineage_core.export.recovery`). Once the new file is in place, every other upload of the
   connector still pending (a killed worker's, a failed abort's) is aborted
   (:mod:`lineage_core.export.leftovers`). The object carries what a reader checks without reading
   it (:mod:`lineage_core.export.object_metadata`): the snapshot time, the run and the product version
   as user metadata, S3's full-object CRC64NVME checksum (verified by S3 on Complete), and the number
   of events as a tag set right after.
3. The run is closed ``succeeded`` (events, bytes, ETag, version, checksum, the 300 KB rule's counts,
   why the event-count tag is missing if it is) or
   ``failed`` with the admin's sentence (:mod:`lineage_core.export.failures`), and the connector's
   next export time is refreshed.
4. A failure is raised, never returned, so RQ records the job as failed: :class:`ExportError`, or
   :class:`TransientExportError` for causes that usually pass by themselves (S3 throttling or 5xx,
   network, database connection) and merit an early retry with backoff. ``KeyboardInterrupt`` and
   ``SystemExit`` (worker shutdown) are recorded and re-raised as they are. An attempt that lost its
   lease records nothing (the run is someone else's) and returns None.

Nothing here logs credentials: the assumed-role credentials never leave :mod:`lineage_core.infra.aws`'s
clients, and database errors are described by their type only (their text can carry SQL parameters).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.exc import SQLAlchemyError

from lineage_core.export.connect import DeferredClient, connect
from lineage_core.export.events import EventWriter
from lineage_core.export.failures import RETRIED, ExportError, TransientExportError, describe_failure
from lineage_core.export.lease import (
    Completing,
    GuardedS3,
    LeaseKeeper,
    LeaseLostError,
    UploadGuard,
    confirm_before_complete,
)
from lineage_core.export.leftovers import abort_leftover_uploads, mark_upload, record_upload
from lineage_core.export.object_metadata import export_metadata, tag_event_count
from lineage_core.export.old_id_check import check_old_external_id
from lineage_core.export.recovery import completed_object
from lineage_core.export.runs import (
    ClaimedRun,
    ExportResult,
    claim,
    close_failed,
    close_succeeded,
    requeue_for_retry,
)
from lineage_core.export.s3_stream import (
    DEFAULT_PART_SIZE,
    DEFAULT_UPLOAD_THREADS,
    S3Target,
    upload_stream,
)
from lineage_core.export.snapshot import snapshot_session, write_snapshot_lines
from lineage_core.infra.aws import AwsClients
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import UploadState
from lineage_core.setup.destination import export_key

__all__ = ["ExportError", "ExportResult", "TransientExportError", "run_export"]

logger = logging.getLogger(__name__)


def run_export(
    settings: Settings,
    run_id: int,
    *,
    clients: AwsClients | None = None,
    part_size: int = DEFAULT_PART_SIZE,
    upload_threads: int = DEFAULT_UPLOAD_THREADS,
    retry_pending: bool = False,
) -> ExportResult | None:
    """Export the snapshot of run ``run_id`` and record the outcome on the run (see the module docstring).

    Args:
        settings: the process's settings (database, AWS endpoint and region).
        run_id: an :class:`~lineage_core.infra.models.ExportRun` created ``queued`` by ``request_export``.
        clients: where STS and S3 clients come from; tests substitute instrumented ones.
        part_size: bytes of each of the first multipart parts (at least 5 MiB; see s3_stream).
        upload_threads: parts uploaded while the next one is generated.
        retry_pending: RQ will retry this job after a transient failure. The run then goes back to
            ``queued`` (with the reason noted) instead of counting as failed.

    Returns:
        The export's result, or None when there was nothing to do (the run is closed, or held by
        another live attempt) or this attempt lost its lease on the way (it stopped before Complete).

    Raises:
        TransientExportError: a failure worth retrying soon; the run is queued again when a retry is
            pending, else recorded as failed.
        ExportError: any other failure; the run is recorded as failed.
        KeyboardInterrupt, SystemExit: the worker is stopping; the run is recorded as failed.
    """
    factory = session_factory(settings.database_url)
    with factory() as session:
        try:
            run = claim(session, run_id)
        except SQLAlchemyError as error:
            session.rollback()
            raise TransientExportError(
                f"The export could not reach Foundational's database ({type(error).__name__}). {RETRIED}"
            ) from error
        if run is None:
            return None
        destination = run.destination
        logger.info(
            "export run %s of connector %s started: s3://%s/%s%s",
            run_id,
            run.connector_id,
            destination.bucket,
            export_key(destination.prefix),
            " (an earlier attempt's outcome is unknown)" if run.completing else "",
        )
        check_old_external_id(settings, run.connector_id, clients)  # during an External ID rotation only
        with LeaseKeeper(settings.database_url, run_id, run.owner) as keeper:
            try:
                result = _export(settings, run, clients, part_size, upload_threads, keeper)
            except LeaseLostError:
                logger.warning("export run %s was taken over by another attempt; this one stopped", run_id)
                return None
            except BaseException as error:
                failure = describe_failure(error, run.connector_id, destination)
                if retry_pending and isinstance(failure, TransientExportError):
                    requeue_for_retry(session, run_id, str(failure), run.owner)
                else:
                    close_failed(session, run_id, run.connector_id, str(failure), run.owner)
                if not isinstance(error, Exception):
                    raise  # KeyboardInterrupt / SystemExit: let the worker stop as it was asked to
                raise failure from error
            try:
                close_succeeded(session, run.connector_id, result, run.owner)
            except SQLAlchemyError as error:
                # The file is in place; the run still says running. Its next attempt (RQ's retry, or the
                # tick's requeue once the lease expired) reads the object's ETag and records the truth.
                raise TransientExportError(
                    "The new export file is in place, but Foundational's database did not answer when "
                    f"the export was recorded ({type(error).__name__}). The next attempt records it."
                ) from error
        logger.info(
            "export run %s succeeded: %d events, %d bytes, %d trimmed, %d omitted, CRC64NVME %s",
            run_id,
            result.events,
            result.bytes,
            result.trimmed,
            result.omitted,
            result.checksum_crc64nvme,
        )
        return result


def _export(
    settings: Settings,
    run: ClaimedRun,
    clients: AwsClients | None,
    part_size: int,
    upload_threads: int,
    keeper: LeaseKeeper,
) -> ExportResult:
    destination = run.destination
    target = S3Target(
        bucket=destination.bucket,
        key=export_key(destination.prefix),
        kms_key_arn=destination.kms_key_arn,
        metadata=export_metadata(run.run_id, run.started_at),
    )
    writer = EventWriter(run.started_at)
    guard = _RunGuard(settings, run, keeper, writer)
    # Assuming the role and building the S3 client take a good fraction of a second (botocore loads
    # its models): done on the side while the first part is generated, nothing waits for them.
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3-connect") as connecting,
        snapshot_session(settings.database_url) as read_session,
    ):
        s3 = DeferredClient(connecting.submit(connect, settings, destination, clients))
        if run.completing is not None:
            found = completed_object(s3, target, run.completing)
            if found is not None:
                # An earlier attempt's Complete went through; only its record was missing.
                logger.info("export run %s: the earlier attempt's file is in place; recording it", run.run_id)
                if run.completing.upload_id:
                    mark_upload(settings, run.completing.upload_id, UploadState.COMPLETED)
                # The earlier attempt may have stopped before it tagged the file: tagging is idempotent.
                tagging_error = tag_event_count(s3, target, run.completing.events)
                abort_leftover_uploads(settings, s3, run.connector_id, run.completing.upload_id)
                return ExportResult(
                    run_id=run.run_id,
                    events=run.completing.events,
                    bytes=run.completing.bytes,
                    etag=found.etag,
                    version_id=found.version_id,
                    trimmed=run.completing.trimmed,
                    omitted=run.completing.omitted,
                    checksum_crc64nvme=found.checksum_crc64nvme,
                    tagging_error=tagging_error,
                )
        uploaded = upload_stream(
            GuardedS3(s3, guard),
            target,
            write_snapshot_lines(read_session, run.organization_id, writer),
            part_size=part_size,
            upload_threads=upload_threads,
        )
    tagging_error = tag_event_count(s3, target, writer.stats.events)
    abort_leftover_uploads(settings, s3, run.connector_id, guard.upload_id)
    return ExportResult(
        run_id=run.run_id,
        events=writer.stats.events,
        bytes=uploaded.size,
        etag=uploaded.etag,
        version_id=uploaded.version_id,
        trimmed=writer.stats.trimmed,
        omitted=writer.stats.omitted,
        checksum_crc64nvme=uploaded.checksum_crc64nvme,
        tagging_error=tagging_error,
    )


class _RunGuard(UploadGuard):
    """The run's side of :class:`GuardedS3`: its lease, its upload rows, what its Complete will do."""

    def __init__(self, settings: Settings, run: ClaimedRun, keeper: LeaseKeeper, writer: EventWriter) -> None:
        self._settings = settings
        self._run = run
        self._keeper = keeper
        self._writer = writer
        self.upload_id: str | None = None

    def check(self) -> None:
        if self._keeper.lost.is_set():
            raise LeaseLostError(f"export run {self._run.run_id} was taken over")

    def record_open(self, upload_id: str, bucket: str, key: str) -> None:
        # If this raises, the upload is aborted and the error propagates (see upload_stream).
        record_upload(
            self._settings, self._run.run_id, self._run.connector_id, self._run.owner, upload_id, bucket, key
        )
        self.upload_id = upload_id

    def before_complete(
        self, upload_id: str | None, etag: str | None, size: int, checksum: str | None
    ) -> None:
        self.check()
        stats = self._writer.stats  # final: the body has been generated whole
        completing = Completing(
            owner=self._run.owner,
            etag=etag,
            events=stats.events,
            bytes=size,
            trimmed=stats.trimmed,
            omitted=stats.omitted,
            upload_id=upload_id,
            checksum=checksum,
        )
        confirm_before_complete(self._settings.database_url, self._run.run_id, completing)
        if upload_id is not None:
            mark_upload(self._settings, upload_id, UploadState.COMPLETING)

    def record_closed(self, upload_id: str, *, completed: bool) -> None:
        mark_upload(self._settings, upload_id, UploadState.COMPLETED if completed else UploadState.ABORTED)
