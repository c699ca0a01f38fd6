"""Multipart uploads an export opened: recorded as soon as they exist, aborted when a worker died.

S3 keeps the parts of a pending upload, invisible but stored (and billed), until it is aborted. Each
run's UploadId is committed the moment S3 hands it out, so that an upload a killed worker left behind
is known; the connector's next successful export aborts those.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError

from lineage_core.export.s3_stream import S3Target
from lineage_core.infra.aws_errors import describe_aws_error, error_code
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import ExportRun

logger = logging.getLogger(__name__)


def record_upload(settings: Settings, run_id: int, upload_id: str) -> None:
    """Keep the UploadId on the run, committed at once: if this process dies, the next export aborts it."""
    with session_factory(settings.database_url)() as session:
        session.execute(update(ExportRun).where(ExportRun.id == run_id).values(upload_id=upload_id))
        session.commit()


def abort_leftover_uploads(
    settings: Settings, s3: Any, target: S3Target, connector_id: int, run_id: int
) -> None:
    """Abort the multipart uploads that earlier runs of the connector left pending (their worker died).

    Done after the new file is in place and never fails the export: an upload S3 no longer knows
    (completed, aborted, expired by a lifecycle rule, or under a bucket or key the connector has since
    left) is forgotten; any other error leaves the UploadId for the next export to try again.
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
                    if error_code(error) != "NoSuchUpload":
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
