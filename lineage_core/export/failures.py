"""Why an export failed, in the admin's words, and whether trying again soon is worth it.

Every failure becomes an :class:`ExportError` whose text is stored on the run and shown on the card:
what went wrong, then what to do, then that the previous file is unchanged. The AWS error vocabulary
(:mod:`lineage_core.infra.aws_errors`) and the advice on the role's permissions
(:mod:`lineage_core.setup.advice`) are the write check's too, so Save and the export say the same.

Database errors are described by their type only: their text can carry SQL parameters.
"""

from __future__ import annotations

import logging

from botocore.exceptions import BotoCoreError, ClientError
from rq.timeouts import JobTimeoutException
from sqlalchemy.exc import SQLAlchemyError

from lineage_core.export.queue import EXPORT_JOB_TIMEOUT_SECONDS
from lineage_core.export.s3_stream import ObjectTooLargeError, S3UploadError
from lineage_core.infra.aws_errors import KMS_CODES, describe_aws_error, error_code, is_transient
from lineage_core.setup.advice import write_advice
from lineage_core.setup.destination import Destination

logger = logging.getLogger(__name__)

UNCHANGED = "The previous export file is unchanged."
RETRIED = "Foundational retries the export automatically."
# Recorded on a run whose worker stopped (shutdown, or killed and closed by the tick).
INTERRUPTED_MESSAGE = (
    "The export was interrupted before it finished (the worker running it stopped). "
    f"{UNCHANGED} Foundational retries on the next nightly run."
)
_TRUST_ADVICE = (
    "The role could be assumed when the connection was saved: check that the CloudFormation stack "
    "(or Terraform module) still exists in AWS account {account} and that the role's trust policy "
    "still names Foundational's account and this connection's External ID."
)


class ExportError(Exception):
    """The export failed. ``str(error)`` is the message stored on the run and shown on the card."""


class TransientExportError(ExportError):
    """The export failed for a reason that usually passes (throttling, S3 5xx, network, database).

    The seam for the scheduler's retry policy: an RQ ``Retry`` or the tick may retry these sooner than
    the next nightly run, with backoff; other :class:`ExportError`\\ s need the admin to change something.
    """


class AssumeRoleError(Exception):
    """The customer's role could not be assumed; ``error`` is AWS's answer."""

    def __init__(self, error: ClientError | BotoCoreError) -> None:
        super().__init__(str(error))
        self.error = error


def describe_failure(error: BaseException, connector_id: int, destination: Destination) -> ExportError:
    """The admin's sentence for ``error``: what went wrong, and what to do about it."""
    if isinstance(error, AssumeRoleError):
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
        logger.error("export of connector %s: database error %s", connector_id, type(error).__name__)
        return TransientExportError(
            "The export could not read the lineage from Foundational's database "
            f"({type(error).__name__}). {UNCHANGED} {RETRIED}"
        )
    if isinstance(error, JobTimeoutException):
        hours = EXPORT_JOB_TIMEOUT_SECONDS // 3600
        return ExportError(f"The export did not finish within {hours} hours and was stopped. {UNCHANGED}")
    if isinstance(error, KeyboardInterrupt | SystemExit):
        return TransientExportError(INTERRUPTED_MESSAGE)
    logger.error("export of connector %s failed unexpectedly", connector_id, exc_info=error)
    return ExportError(
        f"The export failed because of an internal error in Foundational ({type(error).__name__}). "
        f"{UNCHANGED} {RETRIED}"
    )


def _s3_failure(error: S3UploadError, destination: Destination) -> ExportError:
    cause = error.error
    code = error_code(cause)
    where = f"Could not write to {destination.url}"
    if code == "NoSuchBucket":
        return ExportError(
            f"{where}: the bucket {destination.bucket} does not exist. Check the bucket name, "
            f"or create the bucket again. {UNCHANGED}"
        )
    if code == "BadDigest":
        # S3 refused the file because the CRC64NVME checksum sent with it did not match the data it got.
        return TransientExportError(
            f"{where}: S3 refused the file because its CRC64NVME checksum did not match the data S3 "
            f"received ({error.operation}, BadDigest): the data was damaged on the way. {UNCHANGED} {RETRIED}"
        )
    return _aws_failure(
        cause,
        f"{where}: {error.operation} failed, {describe_aws_error(cause)}.",
        write_advice(kms=bool(destination.kms_key_arn) or code in KMS_CODES),
    )


def _aws_failure(error: BaseException, what: str, advice: str) -> ExportError:
    if is_transient(error):
        return TransientExportError(f"{what} {UNCHANGED} {RETRIED}")
    return ExportError(f"{what} {advice} {UNCHANGED}")
