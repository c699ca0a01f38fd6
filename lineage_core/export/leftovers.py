"""Multipart uploads an export opened: a row each, from the moment S3 hands out the UploadId until the
upload is known completed or aborted.

S3 keeps the parts of a pending upload, invisible but stored (and billed), until it is aborted. A run
may open several uploads (one per attempt: RQ retries, a takeover after a database outage), and the
abort of a failed attempt may itself fail (S3 5xx, network, a killed worker). So every upload is a row
of ``export_uploads``, committed the moment it exists; its row says ``completed`` or ``aborted`` once
we know. The connector's next successful export aborts every other upload still ``open`` (or stuck
``completing``): by then it holds the connector's only lease, so none of them can be in use.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError

from lineage_core.infra.aws_errors import describe_aws_error, error_code
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import ExportUpload, UploadState, utcnow

logger = logging.getLogger(__name__)

_PENDING = (UploadState.OPEN, UploadState.COMPLETING)
_FORGOTTEN = {"NoSuchUpload", "NoSuchBucket"}


def record_upload(
    settings: Settings, run_id: int, connector_id: int, owner: str, upload_id: str, bucket: str, key: str
) -> None:
    """Keep the UploadId, committed at once: if this process dies, the next export aborts it."""
    with session_factory(settings.database_url)() as session:
        session.add(
            ExportUpload(
                run_id=run_id,
                connector_id=connector_id,
                owner=owner,
                upload_id=upload_id,
                bucket=bucket,
                object_key=key,
                state=UploadState.OPEN,
                opened_at=utcnow(),
            )
        )
        session.commit()


def mark_upload(settings: Settings, upload_id: str, state: UploadState) -> None:
    """Record what became of an upload. Never raises: a row left ``open`` is only aborted again later."""
    try:
        with session_factory(settings.database_url)() as session:
            closed_at = None if state is UploadState.COMPLETING else utcnow()
            session.execute(
                update(ExportUpload)
                .where(ExportUpload.upload_id == upload_id)
                .values(state=state, closed_at=closed_at)
            )
            session.commit()
    except SQLAlchemyError as error:
        logger.warning(
            "could not record upload %s… as %s: %s", upload_id[:12], state.value, type(error).__name__
        )


def abort_leftover_uploads(
    settings: Settings, s3: Any, connector_id: int, keep_upload_id: str | None
) -> None:
    """Abort every upload of the connector still pending, except ``keep_upload_id`` (this export's own).

    Done after the new file is in place and never fails the export: an upload S3 no longer knows
    (completed, aborted, expired by a lifecycle rule, or in a bucket that is gone) is recorded ``gone``;
    any other error leaves its row ``open`` for the next export to try again.
    """
    with session_factory(settings.database_url)() as session:
        try:
            leftovers = session.execute(
                select(
                    ExportUpload.id,
                    ExportUpload.run_id,
                    ExportUpload.upload_id,
                    ExportUpload.bucket,
                    ExportUpload.object_key,
                ).where(ExportUpload.connector_id == connector_id, ExportUpload.state.in_(_PENDING))
            ).all()
            outcomes: dict[UploadState, list[int]] = {UploadState.ABORTED: [], UploadState.GONE: []}
            for row_id, run_id, upload_id, bucket, key in leftovers:
                if upload_id == keep_upload_id:
                    continue
                try:
                    s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
                except (ClientError, BotoCoreError) as error:
                    if error_code(error) not in _FORGOTTEN:
                        logger.warning(
                            "could not abort the pending upload of export run %s: %s",
                            run_id,
                            describe_aws_error(error),
                        )
                        continue
                    outcomes[UploadState.GONE].append(row_id)
                else:
                    outcomes[UploadState.ABORTED].append(row_id)
            for state, row_ids in outcomes.items():
                if row_ids:
                    session.execute(
                        update(ExportUpload)
                        .where(ExportUpload.id.in_(row_ids))
                        .values(state=state, closed_at=utcnow())
                    )
            session.commit()
            done = outcomes[UploadState.ABORTED] + outcomes[UploadState.GONE]
            if done:
                logger.info("cleaned up %d pending uploads of connector %s", len(done), connector_id)
        except SQLAlchemyError as error:
            session.rollback()
            logger.warning("could not clean up pending uploads: %s", type(error).__name__)
