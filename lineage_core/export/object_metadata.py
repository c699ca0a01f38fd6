"""What the export object says about itself, so that a reader can check it without reading it.

S3 fixes an object's user metadata (``x-amz-meta-*``) when its upload starts, but the number of events
is known only once the last line is written (a job may be left out by the 300 KB rule), and counting
first would mean generating the whole export twice. So the object carries:

* **user metadata**, set with the upload and so atomic with the data: ``snapshot-time`` (the eventTime
  of every line), ``export-run`` (the run's number, as on the History page) and ``product-version``;
* **S3's full-object CRC64NVME checksum** (:mod:`lineage_core.export.checksum`), which S3 verifies
  before the object becomes visible;
* the **object tag** ``event-count``, set right after the upload completes (PutObjectTagging). A new
  export is a new object (or object version) without tags, so a count is never left from an earlier
  export. If the tag cannot be set (a role deployed before it allowed ``s3:PutObjectTagging``), the
  file stays in place, complete and checked; the run says why the tag is missing.

Tagging names no VersionId: that would need ``s3:PutObjectVersionTagging`` too, and the connection's
lease makes this export the key's only writer, so the current version is the one just completed.
"""

from __future__ import annotations

import importlib.metadata
import logging
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.export.events import format_event_time
from lineage_core.export.s3_stream import S3Target
from lineage_core.infra.aws_errors import describe_aws_error, error_code

logger = logging.getLogger(__name__)

SNAPSHOT_TIME = "snapshot-time"
EXPORT_RUN = "export-run"
PRODUCT_VERSION = "product-version"
EVENT_COUNT_TAG = "event-count"
_ACCESS_DENIED = {"AccessDenied", "AccessDeniedException"}


def product_version() -> str:
    """This product's version, as its package says (``dev`` in a clone that was never installed)."""
    try:
        return importlib.metadata.version("openlineage-s3-export")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


def export_metadata(run_id: int, snapshot_time: datetime) -> dict[str, str]:
    """The export object's user metadata (S3 sends each as ``x-amz-meta-<name>``)."""
    return {
        SNAPSHOT_TIME: format_event_time(snapshot_time),
        EXPORT_RUN: str(run_id),
        PRODUCT_VERSION: product_version(),
    }


def tag_event_count(s3: Any, target: S3Target, events: int) -> str | None:
    """Tag the object just completed at ``target`` with its number of events.

    Returns:
        None when the tag is set, else the admin's sentence saying why it is not (never raises for
        an AWS error: the file is in place either way).
    """
    try:
        s3.put_object_tagging(
            Bucket=target.bucket,
            Key=target.key,
            Tagging={"TagSet": [{"Key": EVENT_COUNT_TAG, "Value": str(events)}]},
        )
    except (ClientError, BotoCoreError) as error:
        logger.warning("could not tag s3://%s/%s: %s", target.bucket, target.key, describe_aws_error(error))
        return tagging_failure(error)
    return None


def tagging_failure(error: BaseException) -> str:
    """Why the event-count tag is missing, and what to do, in the admin's words."""
    missing = "The file is in place and its checksum verified, but its event-count tag is not set"
    if error_code(error) in _ACCESS_DENIED:
        return (
            f"{missing}: the role does not allow s3:PutObjectTagging. Update the CloudFormation stack "
            "(or Terraform module) with the current template to allow it."
        )
    return f"{missing} ({describe_aws_error(error)}). The next export sets it again."


__all__ = [
    "EVENT_COUNT_TAG",
    "EXPORT_RUN",
    "PRODUCT_VERSION",
    "SNAPSHOT_TIME",
    "export_metadata",
    "product_version",
    "tag_event_count",
    "tagging_failure",
]
