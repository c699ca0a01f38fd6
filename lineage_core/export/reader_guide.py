"""What a downstream reader runs to check the export file and to learn that a new one landed.

Rendered per connection on "Read the export" (and described in docs/export.md): the AWS CLI commands
that show the file's checksum, metadata and tag without downloading it, and the two ways S3 can announce
a new export: an S3 Event Notification filtered on the file's key, or an EventBridge rule matching it.

Both announcements fire on ``ObjectCreated`` (CompleteMultipartUpload for most exports, PutObject for
small ones), which S3 sends only once the new file is complete. The ``event-count`` tag follows a moment
later (its own ``s3:ObjectTagging:Put`` event); the checksum and metadata are there with the file.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from lineage_core.setup.destination import EXPORT_FILE_NAME, export_key

# Reads the file in 1 MiB blocks, so a file of any size takes little memory.
LOCAL_CRC64NVME_SCRIPT = """\
import base64, sys
from awscrt.checksums import crc64nvme
crc = 0
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        crc = crc64nvme(block, crc)
print(base64.b64encode(crc.to_bytes(8, "big")).decode())"""


@dataclass(frozen=True)
class ReaderGuide:
    key: str
    head_object: str
    get_object_attributes: str
    get_object_tagging: str
    download: str
    local_checksum: str
    notification_configuration: dict[str, Any]
    enable_eventbridge: str
    eventbridge_pattern: dict[str, Any]


def reader_guide(bucket: str, prefix: str) -> ReaderGuide:
    """The commands and filters for the export of ``s3://bucket/<prefix>/openlineage-events.jsonl``."""
    key = export_key(prefix)
    where = f"--bucket {shlex.quote(bucket)} --key {shlex.quote(key)}"
    return ReaderGuide(
        key=key,
        head_object=f"aws s3api head-object {where} --checksum-mode ENABLED",
        get_object_attributes=(
            f"aws s3api get-object-attributes {where} --object-attributes Checksum ObjectSize ETag"
        ),
        get_object_tagging=f"aws s3api get-object-tagging {where}",
        download=f"aws s3api get-object {where} --checksum-mode ENABLED {EXPORT_FILE_NAME}",
        local_checksum=(
            f"python3 -m pip install awscrt\n"
            f"python3 - {EXPORT_FILE_NAME} <<'EOF'\n{LOCAL_CRC64NVME_SCRIPT}\nEOF"
        ),
        notification_configuration=_notification_configuration(key),
        enable_eventbridge=(
            f"aws s3api put-bucket-notification-configuration --bucket {shlex.quote(bucket)} "
            """--notification-configuration '{"EventBridgeConfiguration": {}}'"""
        ),
        eventbridge_pattern={
            "source": ["aws.s3"],
            "detail-type": ["Object Created"],
            "detail": {"bucket": {"name": [bucket]}, "object": {"key": [key]}},
        },
    )


def _notification_configuration(key: str) -> dict[str, Any]:
    """An S3 Event Notification to an SQS queue for exactly the export's key.

    S3 filters by key prefix and suffix only: the whole key as the prefix and the file name as the
    suffix match this file, not the write check's probe object beside it nor the export of a
    connection whose prefix starts with this one (``a/b`` and ``a/b/c``).
    """
    return {
        "QueueConfigurations": [
            {
                "Id": "foundational-openlineage-export",
                "QueueArn": "arn:aws:sqs:REGION:ACCOUNT_ID:QUEUE_NAME",
                "Events": ["s3:ObjectCreated:*"],
                "Filter": {
                    "Key": {
                        "FilterRules": [
                            {"Name": "prefix", "Value": key},
                            {"Name": "suffix", "Value": EXPORT_FILE_NAME},
                        ]
                    }
                },
            }
        ]
    }


__all__ = ["LOCAL_CRC64NVME_SCRIPT", "ReaderGuide", "reader_guide"]
