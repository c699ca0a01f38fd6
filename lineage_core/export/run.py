"""Run one export: the org's current lineage, as OpenLineage NDJSON, into the connector's bucket.

:func:`run_export` is what the RQ job ``worker.jobs.export_connector(run_id)`` does. The contract with
:mod:`lineage_core.export.queue` (which creates the run ``queued`` before enqueueing the job) and with the
scheduler's tick (which closes runs whose worker died):

1. The run is claimed atomically, ``queued`` → ``running`` with ``started_at``, and committed. A run that
   is not ``queued`` any more (closed by the tick, already run, deleted with its connector) is left
   alone and the job returns None.
2. The snapshot: the customer's role is assumed with the connector's External ID (on the side, while
   the first part is generated); the org's graph is
   read in one REPEATABLE READ, read-only transaction (one consistent instant, on PostgreSQL) and each
   job becomes one RunEvent line (:mod:`lineage_core.export.events`, eventTime = ``started_at``);
   the lines are streamed into ``<prefix>/openlineage-events.jsonl`` through one multipart upload
   (:mod:`lineage_core.export.s3_stream`) that completes at the end or is aborted, so readers only
   ever see the previous complete file or the new complete file. The upload's id is committed on the
   run as soon as it exists; once the new file is in place, uploads that earlier runs left pending
   (their worker was killed) are aborted.
3. The run is closed ``succeeded`` (finished_at, events, bytes, ETag, version, and the counts of the
   300 KB rule: events trimmed, jobs left out) or ``failed`` (finished_at and an error the admin can
   act on), only if it is still ``running`` (the tick may have closed it), and the connector's next
   export time is refreshed (:func:`lineage_core.schedule.rules.refresh_next_export`).
4. A failure is raised, never returned, so RQ records the job as failed: :class:`ExportError`, or
   :class:`TransientExportError` for causes that usually pass by themselves (S3 throttling or 5xx,
   network, database connection) and merit an early retry with backoff. ``KeyboardInterrupt`` and
   ``SystemExit`` (worker shutdown) are recorded and re-raised as they are.

Nothing here logs credentials: the assumed-role credentials never leave :mod:`lineage_core.infra.aws`'s
clients, and database errors are described by their type only (their text can carry SQL parameters).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rq.timeouts import JobTimeoutException
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from lineage_core.export.events import EventStats, EventWriter
from lineage_core.export.queue import EXPORT_JOB_TIMEOUT_SECONDS
from lineage_core.export.s3_stream import (
    DEFAULT_PART_SIZE,
    DEFAULT_UPLOAD_THREADS,
    ObjectTooLargeError,
    S3Target,
    S3UploadError,
    UploadedObject,
    upload_stream,
)
from lineage_core.infra import aws
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus, utcnow
from lineage_core.lineage.graph import iter_org_graph
from lineage_core.schedule.rules import refresh_next_export
from lineage_core.schedule.tick import INTERRUPTED_MESSAGE
from lineage_core.setup.destination import EXPORT_FILE_NAME, export_key, s3_url
from lineage_core.setup.write_check import AwsClients, LiveAwsClients, describe_aws_error

logger = logging.getLogger(__name__)

GRAPH_BATCH_SIZE = 500

UNCHANGED = "The previous export file is unchanged."
_RETRIED = "Foundational retries the export automatically."
_TRUST_ADVICE = (
    "The role could be assumed when the connection was saved: check that the CloudFormation stack "
    "(or Terraform module) still exists in AWS account {account} and that the role's trust policy "
    "still names Foundational's account and this connection's External ID."
)
_WRITE_ADVICE = "Check the bucket name, and that the role's policy covers the bucket and prefix."
_KMS_ADVICE = " For SSE-KMS, also check that the role may use the key (kms:GenerateDataKey, kms:Decrypt)."
_KMS_CODES = frozenset({"KMS.DisabledException", "KMS.NotFoundException", "KMS.KMSInvalidStateException"})
# AWS errors that mean "not now" rather than "not allowed": the same request normally works later.
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "IDPCommunicationError",
    }
)


class ExportError(Exception):
    """The export failed. ``str(error)`` is the message stored on the run and shown on the card."""


class TransientExportError(ExportError):
    """The export failed for a reason that usually passes (throttling, S3 5xx, network, database).

    The seam for the scheduler's retry policy: an RQ ``Retry`` or the tick may retry these sooner than
    the next nightly run, with backoff; other :class:`ExportError`\\ s need the admin to change something.
    """


@dataclass(frozen=True)
class ExportResult:
    """A succeeded export, as recorded on its run and returned as the RQ job's result."""

    run_id: int
    events: int
    bytes: int
    etag: str
    version_id: str | None
    trimmed: int  # events written with less detail to stay under 300 KB
    omitted: int  # jobs left out because even their table-level event exceeds 300 KB

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "events": self.events,
            "bytes": self.bytes,
            "etag": self.etag,
            "version_id": self.version_id,
            "trimmed": self.trimmed,
            "omitted": self.omitted,
        }


@dataclass(frozen=True)
class _Destination:
    """The connector's fields the export uses, read once so no ORM object crosses the long export."""

    connector_id: int
    organization_id: int
    bucket: str
    prefix: str
    account_id: str
    role_arn: str
    external_id: str
    region: str | None
    kms_key_arn: str | None

    @property
    def url(self) -> str:
        return s3_url(self.bucket, self.prefix, EXPORT_FILE_NAME)


class _AssumeRoleError(Exception):
    def __init__(self, error: ClientError | BotoCoreError) -> None:
        super().__init__(str(error))
        self.error = error


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
        destination, started_at = _claim(session, run_id)
        if destination is None or started_at is None:
            return None
        logger.info(
            "export run %s of connector %s started: s3://%s/%s",
            run_id,
            destination.connector_id,
            destination.bucket,
            export_key(destination.prefix),
        )
        try:
            uploaded, stats = _export(
                settings, run_id, destination, started_at, clients, part_size, upload_threads
            )
        except BaseException as error:
            failure = _describe_failure(error, destination)
            if retry_pending and isinstance(failure, TransientExportError):
                _requeue_for_retry(session, run_id, str(failure))
            else:
                _close_failed(session, run_id, destination.connector_id, str(failure))
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
        _close_succeeded(session, destination.connector_id, result)
        logger.info(
            "export run %s succeeded: %d events, %d bytes, %d trimmed, %d omitted",
            run_id,
            result.events,
            result.bytes,
            result.trimmed,
            result.omitted,
        )
        return result


def write_snapshot_lines(session: Session, organization_id: int, writer: EventWriter) -> Iterator[bytes]:
    """The NDJSON lines of the organization's current graph, read through ``session``, in bounded memory."""
    with fewer_collections():
        yield from writer.lines(iter_org_graph(session, organization_id, batch_size=GRAPH_BATCH_SIZE))


# Objects allocated between two runs of the cyclic garbage collector while a snapshot is generated.
GENERATION_GC_THRESHOLD = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Let the cyclic garbage collector run less often while a snapshot is generated.

    Generation allocates a few hundred short-lived dicts, lists and tuples per job, none of them in a
    reference cycle, so reference counting frees every one; at Python's default threshold (700
    allocations) the collector still ran every few jobs, for about a third of generation's CPU time
    (measured at 10k jobs). The memory this could hold back is one page of jobs. Restored afterwards.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(GENERATION_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


@contextmanager
def snapshot_session(database_url: str) -> Iterator[Session]:
    """A session whose reads all see one instant of the database: REPEATABLE READ, read-only.

    On PostgreSQL a single transaction at REPEATABLE READ sees a snapshot taken at its first query, so
    every job of the export is as of the same instant however long the export takes. SQLite has one
    writer and no such level; there the reads see what is committed as they run.
    """
    session = session_factory(database_url)()
    try:
        if session.get_bind().dialect.name == "postgresql":
            session.connection(
                execution_options={"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
            )
        yield session
    finally:
        session.rollback()  # read-only: nothing to commit; end the transaction before the pool takes it
        session.close()


def _claim(session: Session, run_id: int) -> tuple[_Destination | None, datetime | None]:
    """Mark the run ``running`` if it is ``queued`` (atomically) and read its connector."""
    started_at = utcnow()
    connector_id = session.execute(
        update(ExportRun)
        .where(ExportRun.id == run_id, ExportRun.status == RunStatus.QUEUED)
        .values(status=RunStatus.RUNNING, started_at=started_at)
        .returning(ExportRun.connector_id)
    ).scalar_one_or_none()
    if connector_id is None:
        session.rollback()
        current = session.get(ExportRun, run_id)
        logger.info(
            "export run %s is %s, not queued: nothing to do",
            run_id,
            current.status.value if current else "gone",
        )
        return None, None
    connector = session.get(Connector, connector_id)
    assert connector is not None  # the run's foreign key cascades: a run without connector is gone
    session.commit()
    problem = _not_exportable(connector)
    if problem is not None:
        _close_failed(session, run_id, connector.id, problem)
        raise ExportError(problem)
    assert connector.bucket and connector.account_id and connector.role_arn  # checked just above
    return (
        _Destination(
            connector_id=connector.id,
            organization_id=connector.organization_id,
            bucket=connector.bucket,
            prefix=connector.prefix,
            account_id=connector.account_id,
            role_arn=connector.role_arn,
            external_id=connector.external_id,
            region=connector.bucket_region,
            kms_key_arn=connector.kms_key_arn,
        ),
        started_at,
    )


def _not_exportable(connector: Connector) -> str | None:
    if connector.status is ConnectorStatus.PAUSED:
        return "The connection is paused, so the export did not run. Resume it to export again."
    if connector.status is not ConnectorStatus.ACTIVE or not (
        connector.bucket and connector.account_id and connector.role_arn
    ):
        return (
            "The connection is not set up yet, so the export did not run. "
            "Finish the setup and click Save: the first export starts then."
        )
    return None


def _export(
    settings: Settings,
    run_id: int,
    destination: _Destination,
    snapshot_time: datetime,
    clients: AwsClients | None,
    part_size: int,
    upload_threads: int,
) -> tuple[UploadedObject, EventStats]:
    target = S3Target(
        bucket=destination.bucket, key=export_key(destination.prefix), kms_key_arn=destination.kms_key_arn
    )
    writer = EventWriter(snapshot_time)
    # Assuming the role and building the S3 client take a good fraction of a second (botocore loads
    # its models): done on the side while the first part is generated, nothing waits for them.
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3-connect") as connecting,
        snapshot_session(settings.database_url) as read_session,
    ):
        s3 = _DeferredClient(connecting.submit(_connect, settings, destination, clients))
        uploaded = upload_stream(
            s3,
            target,
            write_snapshot_lines(read_session, destination.organization_id, writer),
            part_size=part_size,
            upload_threads=upload_threads,
            on_upload_started=lambda upload_id: _record_upload(settings, run_id, upload_id),
        )
    _abort_leftover_uploads(settings, s3, target, destination.connector_id, run_id)
    return uploaded, writer.stats


def _record_upload(settings: Settings, run_id: int, upload_id: str) -> None:
    """Keep the UploadId on the run, committed at once: if this process dies, the next export aborts it."""
    with session_factory(settings.database_url)() as session:
        session.execute(update(ExportRun).where(ExportRun.id == run_id).values(upload_id=upload_id))
        session.commit()


def _abort_leftover_uploads(
    settings: Settings, s3: Any, target: S3Target, connector_id: int, run_id: int
) -> None:
    """Abort the multipart uploads that earlier runs of the connector left pending (their worker died).

    S3 keeps the parts of a pending upload, invisible but stored, until it is aborted. Done after the
    new file is in place and never fails the export: an upload S3 no longer knows (completed, aborted,
    expired by a lifecycle rule, or under a bucket or key the connector has since left) is forgotten;
    any other error leaves the UploadId for the next export to try again.
    """
    with session_factory(settings.database_url)() as session:
        try:
            leftovers = session.execute(
                select(ExportRun.id, ExportRun.upload_id).where(
                    ExportRun.connector_id == connector_id,
                    ExportRun.id != run_id,
                    ExportRun.upload_id.is_not(None),
                )
            ).all()
            done = []
            for leftover_id, upload_id in leftovers:
                try:
                    s3.abort_multipart_upload(Bucket=target.bucket, Key=target.key, UploadId=upload_id)
                except (ClientError, BotoCoreError) as error:
                    gone = isinstance(error, ClientError) and _error_code(error) == "NoSuchUpload"
                    if not gone:
                        logger.warning(
                            "could not abort the pending upload of export run %s: %s",
                            leftover_id,
                            describe_aws_error(error),
                        )
                        continue
                done.append(leftover_id)
            if done:
                session.execute(update(ExportRun).where(ExportRun.id.in_(done)).values(upload_id=None))
                session.commit()
                logger.info("aborted the pending uploads of export runs %s", done)
        except SQLAlchemyError as error:
            session.rollback()
            logger.warning("could not clean up pending uploads: %s", type(error).__name__)


def _connect(settings: Settings, destination: _Destination, clients: AwsClients | None) -> Any:
    """An S3 client acting as the customer's role, in the bucket's region."""
    clients = clients or LiveAwsClients(settings, aws.BACKGROUND_CONFIG)
    try:
        credentials = aws.assume_role(
            settings, destination.role_arn, destination.external_id, sts=clients.sts()
        )
    except (ClientError, BotoCoreError) as error:
        raise _AssumeRoleError(error) from error
    return clients.s3(credentials, destination.region or settings.aws_region)


class _DeferredClient:
    """A client still being created: the first call waits for it, and raises its creation's error.

    That error is an :class:`_AssumeRoleError`, not a botocore one, so the upload never mistakes it
    for a failed S3 request; it aborts (nothing was started) and lets it through.
    """

    def __init__(self, client: Future[Any]) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client.result(), name)


def _describe_failure(error: BaseException, destination: _Destination) -> ExportError:
    """The admin's sentence for ``error``: what went wrong, and what to do about it."""
    if isinstance(error, _AssumeRoleError):
        return _aws_failure(
            error.error,
            f"Could not assume the trust role {destination.role_arn}: {describe_aws_error(error.error)}.",
            _TRUST_ADVICE.format(account=destination.account_id),
        )
    if isinstance(error, S3UploadError):
        return _s3_failure(error, destination)
    if isinstance(error, ObjectTooLargeError):
        return ExportError(f"Could not write to {destination.url}: {error}. {UNCHANGED}")
    if isinstance(error, SQLAlchemyError):
        logger.error(
            "export of connector %s: database error %s", destination.connector_id, type(error).__name__
        )
        return TransientExportError(
            "The export could not read the lineage from Foundational's database "
            f"({type(error).__name__}). {UNCHANGED} {_RETRIED}"
        )
    if isinstance(error, JobTimeoutException):
        hours = EXPORT_JOB_TIMEOUT_SECONDS // 3600
        return ExportError(f"The export did not finish within {hours} hours and was stopped. {UNCHANGED}")
    if isinstance(error, KeyboardInterrupt | SystemExit):
        return TransientExportError(INTERRUPTED_MESSAGE)
    logger.error("export of connector %s failed unexpectedly", destination.connector_id, exc_info=error)
    return ExportError(
        f"The export failed because of an internal error in Foundational ({type(error).__name__}). "
        f"{UNCHANGED} {_RETRIED}"
    )


def _s3_failure(error: S3UploadError, destination: _Destination) -> ExportError:
    cause = error.error
    code = cause.response.get("Error", {}).get("Code") if isinstance(cause, ClientError) else None
    where = f"Could not write to {destination.url}"
    if code == "NoSuchBucket":
        return ExportError(
            f"{where}: the bucket {destination.bucket} does not exist. Check the bucket name, "
            f"or create the bucket again. {UNCHANGED}"
        )
    kms = bool(destination.kms_key_arn) or code in _KMS_CODES or code == "KMS.AccessDeniedException"
    return _aws_failure(
        cause,
        f"{where}: {error.operation} failed, {describe_aws_error(cause)}.",
        _WRITE_ADVICE + (_KMS_ADVICE if kms else ""),
    )


def _aws_failure(error: BaseException, what: str, advice: str) -> ExportError:
    if _is_transient(error):
        return TransientExportError(f"{what} {UNCHANGED} {_RETRIED}")
    return ExportError(f"{what} {advice} {UNCHANGED}")


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _is_transient(error: BaseException) -> bool:
    if isinstance(error, BotoCoreError):
        return True  # could not connect, connection closed, read timeout: nothing AWS refused
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in _TRANSIENT_CODES or status >= 500
    return False


def _close_failed(session: Session, run_id: int, connector_id: int, message: str) -> None:
    """Record the failure, unless the run was closed meanwhile. Never raises over the caller's error."""
    try:
        session.rollback()
        closed = session.execute(
            update(ExportRun)
            .where(ExportRun.id == run_id, ExportRun.status == RunStatus.RUNNING)
            .values(status=RunStatus.FAILED, finished_at=utcnow(), error=message)
        ).rowcount
        if not closed:
            logger.warning("export run %s was closed by someone else; its failure is not recorded", run_id)
        _refresh_schedule(session, connector_id)
        session.commit()
    except SQLAlchemyError as db_error:
        # The run stays "running"; the scheduler's tick closes it once the job is seen failed.
        session.rollback()
        logger.error("could not record the failure of export run %s: %s", run_id, type(db_error).__name__)


def _requeue_for_retry(session: Session, run_id: int, message: str) -> None:
    """Put the run back to ``queued`` for RQ's retry, noting why. Never raises over the caller's error."""
    try:
        session.rollback()
        session.execute(
            update(ExportRun)
            .where(ExportRun.id == run_id, ExportRun.status == RunStatus.RUNNING)
            .values(status=RunStatus.QUEUED, started_at=None, error=f"Retrying after: {message}")
        )
        session.commit()
    except SQLAlchemyError as db_error:
        session.rollback()
        logger.error("could not requeue export run %s: %s", run_id, type(db_error).__name__)


def _close_succeeded(session: Session, connector_id: int, result: ExportResult) -> None:
    closed = session.execute(
        update(ExportRun)
        .where(ExportRun.id == result.run_id, ExportRun.status == RunStatus.RUNNING)
        .values(
            status=RunStatus.SUCCEEDED,
            finished_at=utcnow(),
            events=result.events,
            bytes=result.bytes,
            etag=result.etag,
            version_id=result.version_id,
            trimmed=result.trimmed,
            omitted=result.omitted,
            upload_id=None,  # completed: nothing pending any more
            error=None,
        )
    ).rowcount
    if not closed:
        logger.warning(
            "export run %s was closed by someone else while it ran; the new file is in place", result.run_id
        )
    _refresh_schedule(session, connector_id)
    session.commit()


def _refresh_schedule(session: Session, connector_id: int) -> None:
    connector = session.get(Connector, connector_id)
    if connector is not None:
        session.refresh(connector)
        refresh_next_export(session, connector)
