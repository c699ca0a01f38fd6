"""Run one export: the org's current lineage, as OpenLineage NDJSON, into the connector's bucket.

:func:`run_export` is what the RQ job ``worker.jobs.export_connector(run_id)`` does:

1. The run is claimed (:mod:`lineage_core.export.runs`); a run no longer ``queued`` is left alone.
2. The snapshot: the customer's role is assumed with the connector's External ID
   (:mod:`lineage_core.export.connect`, on the side while the first part is generated); the org's
   graph is read in one consistent, read-only transaction (:mod:`lineage_core.export.snapshot`) and
   each job becomes one RunEvent line (:mod:`lineage_core.export.events`, eventTime = the run's
   ``started_at``); the lines stream into ``<prefix>/openlineage-events.jsonl`` through one multipart
   upload (:mod:`lineage_core.export.s3_stream`) that completes at the end or is aborted, so readers
   only ever see the previous complete file or the new complete file. The upload's id is committed on
   the run as soon as it exists; once the new file is in place, uploads that earlier runs left pending
   (their worker was killed) are aborted (:mod:`lineage_core.export.leftovers`).
3. The run is closed ``succeeded`` (events, bytes, ETag, version, the 300 KB rule's counts) or
   ``failed`` with the admin's sentence (:mod:`lineage_core.export.failures`), and the connector's
   next export time is refreshed.
4. A failure is raised, never returned, so RQ records the job as failed: :class:`ExportError`, or
   :class:`TransientExportError` for causes that usually pass by themselves (S3 throttling or 5xx,
   network, database connection) and merit an early retry with backoff. ``KeyboardInterrupt`` and
   ``SystemExit`` (worker shutdown) are recorded and re-raised as they are.

Nothing here logs credentials: the assumed-role credentials never leave :mod:`lineage_core.infra.aws`'s
clients, and database errors are described by their type only (their text can carry SQL parameters).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from lineage_core.export.connect import DeferredClient, connect
from lineage_core.export.events import EventStats, EventWriter
from lineage_core.export.failures import ExportError, TransientExportError, describe_failure
from lineage_core.export.leftovers import abort_leftover_uploads, record_upload
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
    UploadedObject,
    upload_stream,
)
from lineage_core.export.snapshot import snapshot_session, write_snapshot_lines
from lineage_core.infra.aws import AwsClients
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
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
        The export's result, or None when the run was not ``queued`` (nothing was done).

    Raises:
        TransientExportError: a failure worth retrying soon; the run is queued again when a retry is
            pending, else recorded as failed.
        ExportError: any other failure; the run is recorded as failed.
        KeyboardInterrupt, SystemExit: the worker is stopping; the run is recorded as failed.
    """
    factory = session_factory(settings.database_url)
    with factory() as session:
        run = claim(session, run_id)
        if run is None:
            return None
        destination = run.destination
        logger.info(
            "export run %s of connector %s started: s3://%s/%s",
            run_id,
            run.connector_id,
            destination.bucket,
            export_key(destination.prefix),
        )
        try:
            uploaded, stats = _export(settings, run, clients, part_size, upload_threads)
        except BaseException as error:
            failure = describe_failure(error, run.connector_id, destination)
            if retry_pending and isinstance(failure, TransientExportError):
                requeue_for_retry(session, run_id, str(failure))
            else:
                close_failed(session, run_id, run.connector_id, str(failure))
            if not isinstance(error, Exception):
                raise  # KeyboardInterrupt / SystemExit: let the worker stop as it was asked to
            raise failure from error
        result = ExportResult(
            run_id=run_id,
            events=stats.events,
            bytes=uploaded.size,
            etag=uploaded.etag,
            version_id=uploaded.version_id,
            trimmed=stats.trimmed,
            omitted=stats.omitted,
        )
        close_succeeded(session, run.connector_id, result)
        logger.info(
            "export run %s succeeded: %d events, %d bytes, %d trimmed, %d omitted",
            run_id,
            result.events,
            result.bytes,
            result.trimmed,
            result.omitted,
        )
        return result


def _export(
    settings: Settings,
    run: ClaimedRun,
    clients: AwsClients | None,
    part_size: int,
    upload_threads: int,
) -> tuple[UploadedObject, EventStats]:
    destination = run.destination
    target = S3Target(
        bucket=destination.bucket, key=export_key(destination.prefix), kms_key_arn=destination.kms_key_arn
    )
    writer = EventWriter(run.started_at)
    # Assuming the role and building the S3 client take a good fraction of a second (botocore loads
    # its models): done on the side while the first part is generated, nothing waits for them.
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3-connect") as connecting,
        snapshot_session(settings.database_url) as read_session,
    ):
        s3 = DeferredClient(connecting.submit(connect, settings, destination, clients))
        uploaded = upload_stream(
            s3,
            target,
            write_snapshot_lines(read_session, run.organization_id, writer),
            part_size=part_size,
            upload_threads=upload_threads,
            on_upload_started=lambda upload_id: record_upload(settings, run.run_id, upload_id),
        )
    abort_leftover_uploads(settings, s3, target, run.connector_id, run.run_id)
    return uploaded, writer.stats
