"""Reading the ingest endpoints' request bodies: media type, size before and after gzip, and the events.

Nothing here touches the database. A body is read to its end or one byte past its limit, whatever its
framing (Content-Length or chunked), and decompressed at most one byte past the limit, so neither a
long body nor a small gzip "bomb" can make a worker hold more than the limit in memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec
from flask import request
from werkzeug.exceptions import RequestEntityTooLarge

from lineage_core.infra.config import (
    DEFAULT_LINEAGE_BATCH_MAX_BYTES,
    DEFAULT_LINEAGE_BATCH_MAX_EVENTS,
    DEFAULT_LINEAGE_MAX_EVENT_BYTES,
)
from lineage_core.lineage.parse import Problem

# The defaults of the settings LINEAGE_MAX_EVENT_BYTES, LINEAGE_BATCH_MAX_EVENTS, LINEAGE_BATCH_MAX_BYTES.
DEFAULT_MAX_EVENT_BYTES = DEFAULT_LINEAGE_MAX_EVENT_BYTES
DEFAULT_BATCH_MAX_EVENTS = DEFAULT_LINEAGE_BATCH_MAX_EVENTS
DEFAULT_BATCH_MAX_BYTES = DEFAULT_LINEAGE_BATCH_MAX_BYTES
NDJSON = "application/x-ndjson"
JSON = "application/json"
_READ_CHUNK = 256 * 1024


class RejectedError(Exception):
    """The request as a whole is refused: ``status`` and the problem to answer."""

    def __init__(self, status: int, code: str, field: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.problem = Problem(field, code, message)


def payload_too_large(limit: int, what: str = "The event") -> RejectedError:
    return RejectedError(
        413, "payload_too_large", "body", f"{what} is larger than {limit} bytes; send smaller ones."
    )


def single_event_mimetype() -> None:
    """The single endpoint takes JSON (or no Content-Type: openlineage-python's client sends JSON)."""
    mimetype = request.mimetype
    if mimetype and mimetype != JSON and not mimetype.endswith("+json"):
        raise RejectedError(
            415,
            "unsupported_media_type",
            "Content-Type",
            f"Content-Type must be application/json; got {mimetype}.",
        )


def batch_mimetype() -> str:
    """The batch endpoint's media type: NDJSON or a JSON array."""
    mimetype = request.mimetype
    if mimetype not in (NDJSON, JSON):
        got = f"got {mimetype}" if mimetype else "none was given"
        raise RejectedError(
            415,
            "unsupported_media_type",
            "Content-Type",
            f"Content-Type must be {NDJSON} (one event per line) or {JSON} (an array of events); {got}.",
        )
    return mimetype


def read_raw(limit: int, what: str) -> bytes:
    """The body as sent (maybe compressed); raises the 413 as soon as it is longer than ``limit``.

    A chunked body has no Content-Length. Werkzeug then stops its stream at the app's
    MAX_CONTENT_LENGTH without an error when the reader asks for no more than that, and a single read
    returned the body cut at 5 MiB: an event followed by 6 MB of whitespace was stored. So the stream's
    own maximum is set one byte past ours, and it is read to its end (or one byte past the limit).
    """
    if request.content_length is not None and request.content_length > limit:
        raise payload_too_large(limit, what)
    request.max_content_length = limit + 1
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= limit:
            chunk = request.stream.read(min(_READ_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except RequestEntityTooLarge:
        raise payload_too_large(limit, what) from None
    if size > limit:
        raise payload_too_large(limit, what)
    return b"".join(chunks)


def content_encoding() -> str:
    """``identity`` or ``gzip``, checked before the body is read."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("identity", ""):
        return "identity"
    if encoding != "gzip":
        raise RejectedError(
            415,
            "unsupported_media_type",
            "Content-Encoding",
            f"Content-Encoding must be gzip or absent; got {encoding}.",
        )
    return encoding


def decoded(raw: bytes, encoding: str, limit: int, what: str) -> bytes:
    """The body decompressed, never more than ``limit`` bytes.

    A gzip body may hold several members one after the other (``cat a.gz b.gz``, or a client that
    compresses each chunk it streams): like ``gzip -d``, every member is read, so no event after the
    first member is silently dropped. Anything after a member that is not another member is an error.
    """
    if encoding == "identity":
        return raw
    parts: list[bytes] = []
    size = 0
    remaining = raw
    while True:
        # Decompress at most limit + 1 bytes in all: a small "zip bomb" must not expand into memory.
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = decompressor.decompress(remaining, limit + 1 - size)
        except zlib.error as error:
            raise RejectedError(
                400, "malformed_body", "body", f"The body is not valid gzip: {error}."
            ) from None
        parts.append(part)
        size += len(part)
        if size > limit or decompressor.unconsumed_tail:
            raise payload_too_large(limit, what)
        if not decompressor.eof:
            raise RejectedError(400, "malformed_body", "body", "The gzip body is truncated.")
        remaining = decompressor.unused_data
        if not remaining:
            return b"".join(parts)


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One event of a batch as sent: its bytes, or None when it is longer than the per-event limit."""

    content: bytes | None
    size: int


def split_batch(body: bytes, mimetype: str, max_events: int, max_event_bytes: int) -> list[RawEvent]:
    """The events of a batch body, in order, each still to be parsed on its own.

    Raises:
        RejectedError: 400 ``malformed_body`` (not a JSON array, or no events), 413 ``too_many_events``.
    """
    if mimetype == NDJSON:
        items: list[bytes] = [line for line in _lines(body) if line.strip()]
    else:
        try:
            # Each element stays raw (validated JSON, not decoded): parse_event reads it, like a line.
            items = [bytes(raw) for raw in msgspec.json.decode(body, type=list[msgspec.Raw])]
        except msgspec.DecodeError as error:
            raise RejectedError(
                400,
                "malformed_body",
                "body",
                f"A {JSON} body must be one JSON array of events: {error}. "
                f"For one event per line, send Content-Type: {NDJSON}.",
            ) from None
    if not items:
        raise RejectedError(400, "malformed_body", "body", "The body holds no events.")
    if len(items) > max_events:
        raise RejectedError(
            413,
            "too_many_events",
            "body",
            f"The batch holds {len(items):,} events; at most {max_events:,} are allowed per request. "
            "Send them in several batches.",
        )
    return [RawEvent(item if len(item) <= max_event_bytes else None, len(item)) for item in items]


def _lines(body: bytes) -> Iterator[bytes]:
    start = 0
    while start < len(body):
        end = body.find(b"\n", start)
        if end == -1:
            end = len(body)
        yield body[start:end].rstrip(b"\r")
        start = end + 1
