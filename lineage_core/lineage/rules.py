"""The value rules of an incoming event that both of its readers apply.

:mod:`lineage_core.lineage.fast_path` accepts a valid event quickly; :mod:`lineage_core.lineage.parse`
names every problem of an invalid one. Both read runIds, eventTimes, schema depth and transformation
types by the rules here, so they cannot drift apart on what a valid value is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal, get_args

MAX_SCHEMA_DEPTH = 32
# A producer whose clock runs far ahead would freeze a job's lineage: every correct later event would
# look older than the one it sent. A day of tolerance covers any sane clock skew.
MAX_FUTURE = timedelta(days=1)
TransformationType = Literal["DIRECT", "INDIRECT"]
TRANSFORMATION_TYPES: tuple[str, ...] = get_args(TransformationType)

# ASCII-only and anchored with \A...\Z: "\d" would take Arabic-Indic digits (which int() then reads),
# and "$" would accept a trailing newline.
UUID_PATTERN = re.compile(
    r"\A[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z", re.ASCII
)
DATE_TIME_PATTERN = re.compile(
    r"\A([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}:?[0-9]{2})?\Z",
    re.ASCII,
)


def to_utc_datetime(match: re.Match[str]) -> datetime:
    """The moment a :data:`DATE_TIME_PATTERN` match names, in UTC.

    Raises:
        ValueError: a part is out of range (February 30th, an offset of +25:00).
        OverflowError: the moment cannot be shifted to UTC (year 1 with a positive offset).
    """
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    # Producers send anything from seconds to nanoseconds; the store keeps microseconds.
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    offset = match.group("offset") or "Z"
    if offset in ("Z", "z"):
        tz = UTC
    else:
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            raise ValueError("offset out of range")
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz).astimezone(UTC)
