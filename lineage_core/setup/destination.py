"""Rules for the export destination fields of the setup wizard, and the names derived from them.

Each ``parse_*`` function takes what a person typed and returns the canonical value or raises
:class:`FieldError` with a sentence that says what is wrong and what to enter instead. The same rules
back the portal's form, the CLI and the Terraform module's validation blocks.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from dataclasses import dataclass

EXPORT_FILE_NAME = "openlineage-events.jsonl"
PROBE_OBJECT_NAME = ".foundational-export-writecheck"
MIN_INTERVAL_DAYS = 14
DEFAULT_INTERVAL_DAYS = 14
MAX_INTERVAL_DAYS = 365
MAX_KEY_BYTES = 1024

# Every pattern here is ASCII-only (re.ASCII: \d and \w match no other script's digits or letters) and
# anchored with \A...\Z ("$" would also match before a trailing newline).
_BUCKET_CHARS = re.compile(r"\A[a-z0-9][a-z0-9.-]*[a-z0-9]\Z", re.ASCII)
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# ASCII letters, digits and S3's "safe" punctuation. Excludes '*', '?' and '$' on purpose: the prefix is
# pasted into IAM policy resources, where those would widen the grant (wildcards, policy variables).
_PREFIX_SEGMENT = re.compile(r"\A[A-Za-z0-9!_.'()=+-]+\Z", re.ASCII)
_ACCOUNT_ID = re.compile(r"\A[0-9]{12}\Z", re.ASCII)
_DASHED_ACCOUNT_ID = re.compile(r"\A[0-9]{4}-[0-9]{4}-[0-9]{4}\Z", re.ASCII)
_DAYS = re.compile(r"\A[0-9]{1,6}\Z", re.ASCII)
_ROLE_NAME = re.compile(r"\A[\w+=,.@-]{1,64}\Z", re.ASCII)
_ROLE_PATH = re.compile(r"\A/(?:[\w+=,.@-]+/)*\Z", re.ASCII)
_PARTITION = r"aws(?:-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?"
_KMS_KEY_ARN = re.compile(
    rf"\Aarn:{_PARTITION}:kms:[a-z0-9-]+:[0-9]{{12}}:key/[A-Za-z0-9-]{{1,128}}\Z", re.ASCII
)
_POLICY_ARN = re.compile(
    rf"\Aarn:{_PARTITION}:iam::(?:[0-9]{{12}}|aws):policy/(?:[\w+=,.@-]+/)*[\w+=,.@-]{{1,128}}\Z",
    re.ASCII,
)
EXTERNAL_ID_PATTERN = re.compile(r"\A[\w+=,.@:/-]{32,1224}\Z", re.ASCII)


class FieldError(ValueError):
    """A field's value breaks a rule; ``str(error)`` is the message shown next to the field."""


def parse_bucket_name(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise FieldError("Enter the S3 bucket name.")
    if value.lower().startswith(("s3://", "arn:", "https://", "http://")):
        raise FieldError(
            "Enter only the bucket name, without s3://, an ARN or a URL (for example: my-bucket)."
        )
    if "/" in value:
        raise FieldError("A bucket name has no '/'. Put folders in the Prefix field.")
    if not 3 <= len(value) <= 63:
        raise FieldError("A bucket name has 3 to 63 characters.")
    if value != value.lower():
        raise FieldError("A bucket name has no uppercase letters.")
    if not _BUCKET_CHARS.match(value):
        raise FieldError(
            "A bucket name has only lowercase letters, digits, '.' and '-', and starts and ends "
            "with a letter or digit."
        )
    if ".." in value or ".-" in value or "-." in value:
        raise FieldError("A bucket name has no '..', '.-' or '-.'.")
    if _looks_like_ip(value):
        raise FieldError("A bucket name cannot look like an IP address.")
    if value.startswith(_BUCKET_RESERVED_PREFIXES) or value.endswith(_BUCKET_RESERVED_SUFFIXES):
        raise FieldError("That bucket name uses a prefix or suffix that AWS reserves.")
    return value


def _looks_like_ip(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def parse_prefix(raw: str) -> str:
    """The prefix as stored: no leading or trailing '/', '' for the bucket root.

    The export then lands at exactly ``<prefix>/openlineage-events.jsonl``.
    """
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise FieldError("The prefix cannot contain control characters (tabs, line breaks).")
    value = raw.strip()
    if value.lower().startswith("s3://"):
        raise FieldError("Enter only the folder inside the bucket, without s3:// and the bucket name.")
    value = value.strip("/")
    if not value:
        return ""
    if "//" in value:
        raise FieldError("The prefix cannot contain empty folders ('//').")
    for segment in value.split("/"):
        if segment in {".", ".."}:
            raise FieldError("The prefix cannot contain '.' or '..' folders.")
        if not _PREFIX_SEGMENT.match(segment):
            raise FieldError(
                "The prefix may contain letters, digits, '/' between folders, and ! _ . ' ( ) = + -. "
                "Spaces, '*', '?', '$' and other characters are not allowed."
            )
    longest = object_key(value, PROBE_OBJECT_NAME)
    if len(longest.encode()) > MAX_KEY_BYTES:
        raise FieldError(f"The prefix is too long: object keys under it would exceed {MAX_KEY_BYTES} bytes.")
    return value


def parse_account_id(raw: str) -> str:
    stripped = raw.strip()
    value = stripped.replace("-", "") if _DASHED_ACCOUNT_ID.match(stripped) else stripped
    if not _ACCOUNT_ID.match(value):
        raise FieldError("An AWS account ID is exactly 12 digits (for example: 123456789012).")
    return value


def parse_role_name(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise FieldError("Enter the IAM role name.")
    if len(value) > 64:
        raise FieldError("An IAM role name has at most 64 characters.")
    if not _ROLE_NAME.match(value):
        raise FieldError("An IAM role name has only letters, digits and + = , . @ _ -.")
    return value


def parse_role_path(raw: str) -> str:
    value = raw.strip() or "/"
    if not value.startswith("/"):
        value = "/" + value
    if not value.endswith("/"):
        value += "/"
    if len(value) > 512 or not _ROLE_PATH.match(value) or "//" in value:
        raise FieldError(
            "A role path is '/' or folders of letters, digits and + = , . @ _ - between slashes "
            "(for example: /integrations/), at most 512 characters."
        )
    return value


def parse_kms_key_arn(raw: str) -> str | None:
    value = raw.strip()
    if not value:
        return None
    if not _KMS_KEY_ARN.match(value):
        raise FieldError(
            "Enter the key's full ARN (arn:aws:kms:<region>:<account>:key/<key-id>). "
            "Aliases are not accepted: IAM grants apply to the key ARN."
        )
    return value


def parse_permissions_boundary_arn(raw: str) -> str | None:
    value = raw.strip()
    if not value:
        return None
    if not _POLICY_ARN.match(value):
        raise FieldError("Enter a managed policy ARN (arn:aws:iam::<account>:policy/<name>).")
    return value


def parse_interval_days(raw: str | int) -> int:
    text = str(raw).strip()
    if not text:
        return DEFAULT_INTERVAL_DAYS
    if not _DAYS.match(text):
        raise FieldError(f"Enter a whole number of days from {MIN_INTERVAL_DAYS} to {MAX_INTERVAL_DAYS}.")
    value = int(text)
    if value < MIN_INTERVAL_DAYS:
        raise FieldError(f"The export interval is at least {MIN_INTERVAL_DAYS} days.")
    if value > MAX_INTERVAL_DAYS:
        raise FieldError(f"The export interval is at most {MAX_INTERVAL_DAYS} days.")
    return value


def new_external_id() -> str:
    """A fresh External ID: 192 random bits, URL-safe, within IAM's allowed characters."""
    return "olx-" + secrets.token_urlsafe(24)


def object_key(prefix: str, name: str) -> str:
    """The key of ``name`` directly under ``prefix`` (a stored, normalised prefix)."""
    return f"{prefix}/{name}" if prefix else name


def export_key(prefix: str) -> str:
    return object_key(prefix, EXPORT_FILE_NAME)


def probe_key(prefix: str) -> str:
    return object_key(prefix, PROBE_OBJECT_NAME)


def s3_url(bucket: str, prefix: str, name: str | None = None) -> str:
    key = object_key(prefix, name) if name else (f"{prefix}/" if prefix else "")
    return f"s3://{bucket}/{key}"


def partition_for_region(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def role_arn(partition: str, account_id: str, role_path: str, role_name: str) -> str:
    return f"arn:{partition}:iam::{account_id}:role{role_path}{role_name}"


@dataclass(frozen=True)
class Destination:
    """Where a connector's export lands and the role that may write it.

    The one shape the write check (on Save) and the export (in a worker) read a connector's settings
    in, so that no ORM object crosses a long export and both check exactly the same thing.
    """

    bucket: str
    prefix: str
    account_id: str
    role_arn: str
    external_id: str
    kms_key_arn: str | None = None
    region: str | None = None  # the bucket's region, once a write check has found it

    @property
    def url(self) -> str:
        """``s3://bucket/prefix/openlineage-events.jsonl``, as the admin sees it."""
        return s3_url(self.bucket, self.prefix, EXPORT_FILE_NAME)
