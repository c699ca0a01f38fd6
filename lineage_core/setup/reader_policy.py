"""The read-only IAM policy a downstream tool needs to read the export (spec, Part 4)."""

from __future__ import annotations

from typing import Any

from lineage_core.setup.destination import EXPORT_FILE_NAME, object_key


def reader_policy(bucket: str, prefix: str, partition: str = "aws") -> dict[str, Any]:
    """s3:GetObject on the export, s3:ListBucket on the prefix, s3:GetBucketLocation on the bucket.

    GetObject is granted on ``*.jsonl`` directly under the prefix: exactly the file mask readers use,
    and nothing else the bucket may hold under that prefix. The same objects' tags and attributes
    (read-only) let a reader check the file without downloading it: its ``event-count`` tag and its
    full-object CRC64NVME checksum (lineage_core.export.object_metadata).
    """
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    listing: dict[str, Any] = {
        "Sid": "ListExport",
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": bucket_arn,
    }
    if prefix:
        listing["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadExport",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"{bucket_arn}/{object_key(prefix, '*.jsonl')}",
            },
            {
                "Sid": "VerifyExport",
                "Effect": "Allow",
                "Action": ["s3:GetObjectTagging", "s3:GetObjectAttributes"],
                "Resource": f"{bucket_arn}/{object_key(prefix, '*.jsonl')}",
            },
            listing,
            {
                "Sid": "LocateBucket",
                "Effect": "Allow",
                "Action": "s3:GetBucketLocation",
                "Resource": bucket_arn,
            },
        ],
    }


def export_object_key(prefix: str) -> str:
    return object_key(prefix, EXPORT_FILE_NAME)
