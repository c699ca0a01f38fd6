"""Finding out what an earlier attempt's Complete step did, when the attempt could not record it.

Just before its Complete step (CompleteMultipartUpload, or the single PutObject of a small body) an
attempt notes on the run the ETag the object will have if the step goes through
(:func:`lineage_core.export.lease.confirm_before_complete`). If the database then fails (or the worker
dies) before the outcome is recorded, the next attempt on the run reads the object's ETag: the same one
means the file in the bucket is that attempt's, and the run is recorded ``succeeded`` with its figures;
anything else means the Complete did not go through, and the attempt exports again.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.export.lease import Completing
from lineage_core.export.s3_stream import S3Target, S3UploadError
from lineage_core.infra.aws_errors import error_code

_ABSENT = {"404", "NoSuchKey", "NotFound"}


def completed_object(s3: Any, target: S3Target, completing: Completing) -> tuple[str, str | None] | None:
    """The object's ETag and version when it is the one ``completing`` describes, else None.

    Raises:
        S3UploadError: HeadObject failed for another reason than the object being absent.
    """
    if completing.etag is None:
        return None  # the ETag could not be foreseen (SSE-KMS single PutObject): export again
    try:
        head = s3.head_object(Bucket=target.bucket, Key=target.key)
    except (ClientError, BotoCoreError) as error:
        if error_code(error) in _ABSENT:
            return None
        raise S3UploadError("HeadObject", error) from error
    if head.get("ETag") != completing.etag:
        return None
    return head["ETag"], head.get("VersionId")
