"""What an AWS failure was: its code, a secret-free description, and whether it usually passes.

Shared by the write check (an admin waits on Save) and the export (a worker retries): both describe
AWS's answers the same way and agree on which ones are worth retrying.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

# AWS errors that mean "not now" rather than "not allowed": the same request normally works later.
TRANSIENT_CODES = frozenset(
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
# Errors that mean the KMS key, not S3, refused: the advice then names the key permissions.
KMS_CODES = frozenset(
    {
        "KMS.DisabledException",
        "KMS.NotFoundException",
        "KMS.KMSInvalidStateException",
        "KMS.AccessDeniedException",
    }
)


def error_code(error: BaseException) -> str:
    """AWS's error code (``"AccessDenied"``), or ``""`` for anything that is not an AWS answer."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def describe_aws_error(error: BaseException) -> str:
    """A short, secret-free description of an AWS failure: the error code and AWS's message."""
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        code = info.get("Code") or "Error"
        message = info.get("Message") or ""
        return f"{code} ({message})" if message and message != code else str(code)
    if isinstance(error, BotoCoreError):
        return f"AWS could not be reached: {error}"
    return type(error).__name__


def is_transient(error: BaseException) -> bool:
    """True when the same request normally works a little later (throttling, 5xx, network)."""
    if isinstance(error, BotoCoreError):
        return True  # could not connect, connection closed, read timeout: nothing AWS refused
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(error) in TRANSIENT_CODES or status >= 500
    return False
