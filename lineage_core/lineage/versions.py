"""Which of two states of the same thing is the current one.

Every replaceable part of the graph (a job's lineage, its documentation, SQL and job type; a dataset's
schema and documentation) remembers the *version* of the state it holds: a string
``<eventTime as UTC, microseconds>/<rank>/<fingerprint of the content>``. Versions compare as plain
strings, in the database and in Python alike, and that order is total:

* a later ``eventTime`` wins, so an older event that arrives late changes nothing;
* at the same ``eventTime`` a higher rank wins (a COMPLETE over the START of the same instant);
* at the same time and rank the larger content fingerprint wins, an arbitrary but fixed choice, so the
  final state does not depend on the order in which the events arrived;
* the very same content at the very same time is the same version: posting an event twice is a no-op.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import orjson

_FINGERPRINT_CHARS = 32  # 128 bits of SHA-256: collisions are not a practical concern


def fingerprint(content: Any) -> str:
    """A short stable hash of ``content`` (anything orjson serializes, dataclasses included)."""
    return hashlib.sha256(orjson.dumps(content)).hexdigest()[:_FINGERPRINT_CHARS]


def make_version(event_time: datetime, rank: int, content_fingerprint: str) -> str:
    """The version string of content observed at ``event_time``; ``rank`` is 0-9."""
    if not 0 <= rank <= 9:
        raise ValueError(f"rank must be a single digit; got {rank}")
    return f"{_moment(event_time)}Z/{rank}/{content_fingerprint}"


@lru_cache(maxsize=4096)
def _moment(event_time: datetime) -> str:
    # An event's parts all carry its one eventTime (about ten versions per event): formatted once.
    # isoformat pads the year to 4 digits (strftime's %Y does not on every platform), so the string
    # order is the chronological order for every year datetime supports.
    return event_time.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def supersedes(candidate: str, held: str | None) -> bool:
    """True when a state of version ``candidate`` should replace the held one."""
    return held is None or candidate > held


def same_content(version_a: str | None, version_b: str | None) -> bool:
    """True when both versions describe identical content (whatever their times)."""
    if version_a is None or version_b is None:
        return False
    return version_a.rsplit("/", 1)[1] == version_b.rsplit("/", 1)[1]
