"""Finding out what an earlier attempt's Complete step did, when the attempt could not record it.

Just before its Complete step (CompleteMultipartUpload, or the single PutObject of a small body) an
attempt notes on the run what the object will be if the step goes through: its full-object CRC64NVME
checksum and, when it can be foreseen, its ETag (:func:`lineage_core.export.lease.confirm_before_complete`).
If the database then fails (or the worker dies) before the outcome is recorded, the next attempt reads
the object's head: the same run number in its metadata (``export-run``) and the same checksum (S3
verified it against the data) or, for a record written before checksums were kept, the same ETag,
mean the file in the bucket is that attempt's, and the run is recorded ``succeeded`` with its
figures; anything else means the Complete did not go through, and the attempt exports again. The run
number matters for files that are alike whatever the export (an organization without lineage gives
an empty file, with the same checksum and ETag every time); the checksum also recognises a single
PutObject under SSE-KMS, whose ETag cannot be foreseen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.export.lease import Completing
from lineage_core.export.object_metadata import EXPORT_RUN
from lineage_core.export.s3_stream import S3Target, S3UploadError
from lineage_core.infra.aws_errors import error_code

_ABSENT = {"404", "NoSuchKey", "NotFound"}


@dataclass(frozen=True)
class FoundObject:
    """The object an earlier attempt's Complete put in place."""

    etag: str
    version_id: str | None
    checksum_crc64nvme: str | None  # None only for a record written before checksums were kept


def completed_object(s3: Any, target: S3Target, completing: Completing) -> FoundObject | None:
    """The object at the target when it is the one ``completing`` describes, else None.

    ``target`` is the retrying attempt's: its metadata names the same run as the earlier attempt's.

    Raises:
        S3UploadError: HeadObject failed for another reason than the object being absent.
    """
    if completing.checksum is None and completing.etag is None:
        return None  # nothing to recognise it by: export again
    try:
        head = s3.head_object(Bucket=target.bucket, Key=target.key, ChecksumMode="ENABLED")
    except (ClientError, BotoCoreError) as error:
        if error_code(error) in _ABSENT:
            return None
        raise S3UploadError("HeadObject", error) from error
    if head.get("Metadata", {}).get(EXPORT_RUN) != target.metadata.get(EXPORT_RUN):
        return None  # another run's file (or one written before the run was named on it)
    if completing.checksum is not None:
        if head.get("ChecksumCRC64NVME") != completing.checksum:
            return None
    elif head.get("ETag") != completing.etag:
        return None
    return FoundObject(
        etag=head["ETag"], version_id=head.get("VersionId"), checksum_crc64nvme=head.get("ChecksumCRC64NVME")
    )
