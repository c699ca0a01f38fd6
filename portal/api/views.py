"""``POST /api/v1/lineage``: one OpenLineage event per request, as openlineage-python's HTTP transport
and Marquez clients send it.

Contract:
    Request: ``Authorization: Bearer <org API key>``; ``Content-Type: application/json`` (or none);
    optionally ``Content-Encoding: gzip`` (the client's ``compression: gzip``); optionally
    ``X-Organization: <org slug>`` to make sure the key is the one of the organization you mean.
    Body: one RunEvent, JobEvent or DatasetEvent, at most ``LINEAGE_MAX_EVENT_BYTES`` (app config,
    default 5 MiB) before and after decompression.

    201: the event is stored (or was already: posting it again is harmless). The body says what it did:
    ``{"status": "accepted", "lineage": "replaced|refreshed|unchanged|stale|not_carried",
    "jobFacetsUpdated": [...], "datasetFacetsUpdated": n}``.

    4xx: the event is rejected and nothing of it is stored. The body always has the same shape:
    ``{"error": code, "message": sentence, "field": path, "problems": [{"field", "code", "message"}]}``.
    400 malformed or invalid event; 401 missing, invalid or revoked key; 403 key of another
    organization than ``X-Organization``; 413 body too large (``payload_too_large``, with or without
    Content-Length: a chunked body is refused the same way), or more inputs, outputs, schema fields or
    column-lineage edges than :mod:`lineage_core.lineage.limits` allows (``event_too_large``, naming
    the limit); 415 unsupported Content-Type or Content-Encoding. 429: too many requests with a bad
    key from this address, or with this key's prefix (``Retry-After``; see :mod:`portal.limits`). 503:
    the database is unavailable; retry later (the client does).
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from werkzeug.exceptions import RequestEntityTooLarge

from lineage_core.accounts.api_keys import (
    AuthenticationError,
    authenticate,
    key_prefix_of,
    parse_bearer,
    record_use,
)
from lineage_core.infra.models import Organization
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.parse import EventError, EventTooLargeError, Problem, parse_event
from portal.database import get_db
from portal.extensions import csrf
from portal.limits import api_key_address_limit, bad_key_refused_for_prefix, count_failure
from portal.security import public_endpoint

DEFAULT_MAX_EVENT_BYTES = 5 * 1024 * 1024
_READ_CHUNK = 256 * 1024
ORG_HEADER = "X-Organization"

log = logging.getLogger(__name__)

bp = Blueprint("api", __name__, url_prefix="/api/v1")
# Machine clients authenticate with a bearer key on every request and hold no session cookie, so a
# cross-site form cannot act for them: CSRF tokens do not apply to this blueprint.
csrf.exempt(bp)


class _RejectedError(Exception):
    def __init__(self, status: int, code: str, field: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.problem = Problem(field, code, message)


def _error(status: int, error: str, problems: list[Problem]) -> tuple[Response, int]:
    first = problems[0]
    body = {
        "error": error,
        "message": first.message,
        "field": first.field,
        "problems": [{"field": p.field, "code": p.code, "message": p.message} for p in problems],
    }
    response = jsonify(body)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="openlineage"'
    return response, status


def _max_bytes() -> int:
    """The event's limit: ``LINEAGE_MAX_EVENT_BYTES``, never more than the app-wide MAX_CONTENT_LENGTH."""
    limit = int(current_app.config.get("LINEAGE_MAX_EVENT_BYTES", DEFAULT_MAX_EVENT_BYTES))
    app_limit = current_app.config.get("MAX_CONTENT_LENGTH")
    return min(limit, int(app_limit)) if app_limit else limit


def _too_large(limit: int) -> _RejectedError:
    return _RejectedError(
        413, "payload_too_large", "body", f"The event is larger than {limit} bytes; send smaller events."
    )


def _read_body(limit: int) -> bytes:
    """The request body, decompressed, never more than ``limit`` bytes in memory."""
    mimetype = request.mimetype
    if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
        raise _RejectedError(
            415,
            "unsupported_media_type",
            "Content-Type",
            f"Content-Type must be application/json; got {mimetype}.",
        )
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    raw = _read_at_most(limit)
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("identity", ""):
        return raw
    if encoding != "gzip":
        raise _RejectedError(
            415,
            "unsupported_media_type",
            "Content-Encoding",
            f"Content-Encoding must be gzip or absent; got {encoding}.",
        )
    # Decompress at most limit + 1 bytes: a small "zip bomb" must not expand into memory.
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        body = decompressor.decompress(raw, limit + 1)
    except zlib.error as error:
        raise _RejectedError(400, "malformed_body", "body", f"The body is not valid gzip: {error}.") from None
    if len(body) > limit or decompressor.unconsumed_tail:
        raise _too_large(limit)
    if not decompressor.eof:
        raise _RejectedError(400, "malformed_body", "body", "The gzip body is truncated.")
    return body


def _read_at_most(limit: int) -> bytes:
    """The raw body; raises the 413 as soon as it is longer than ``limit``, whatever its framing.

    A chunked body has no Content-Length. Werkzeug then stops its stream at the app's
    MAX_CONTENT_LENGTH without an error when the reader asks for no more than that, and a single read
    returned the body cut at 5 MiB: an event followed by 6 MB of whitespace was stored. So the stream's
    own maximum is set one byte past ours, and it is read to its end (or one byte past the limit).
    """
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
        raise _too_large(limit) from None
    if size > limit:
        raise _too_large(limit)
    return b"".join(chunks)


@bp.post("/lineage")
@public_endpoint
@api_key_address_limit
def ingest_lineage() -> tuple[Response, int]:
    db = get_db()
    try:
        return _ingest(db)
    except DBAPIError:
        log.exception("storing a lineage event failed")
        message = "The event could not be stored now; send it again later."
        response, status = _error(
            503, "database_unavailable", [Problem("body", "database_unavailable", message)]
        )
        response.headers["Retry-After"] = "5"
        return response, status


def _credential() -> str:
    scheme, _, credential = (request.headers.get("Authorization") or "").strip().partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else ""


def _ingest(db: Session) -> tuple[Response, int]:
    try:
        caller = authenticate(db, parse_bearer(request.headers.get("Authorization")))
        expected_org = request.headers.get(ORG_HEADER)
        if expected_org is not None:
            slug = db.scalar(select(Organization.slug).where(Organization.id == caller.organization_id))
            if slug != expected_org.strip():
                raise _RejectedError(
                    403,
                    "wrong_organization",
                    ORG_HEADER,
                    f"This API key belongs to another organization than {expected_org.strip()!r}; "
                    "use a key created in that organization.",
                )
        # End the key lookup's transaction before reading the body: a slow client must not keep a
        # database transaction open.
        db.rollback()
        event = parse_event(_read_body(_max_bytes()))
    except AuthenticationError as error:
        count_failure("api_key")
        prefix = key_prefix_of(_credential())
        refused = bad_key_refused_for_prefix(prefix) if prefix else None
        if refused is not None:
            return refused, 429
        return _error(401, error.reason.value, [Problem("Authorization", error.reason.value, str(error))])
    except _RejectedError as rejected:
        return _error(rejected.status, rejected.problem.code, [rejected.problem])
    except EventTooLargeError as error:
        return _error(413, "event_too_large", error.problems)
    except EventError as error:
        code = "malformed_json" if error.problems[0].code == "malformed_json" else "invalid_event"
        return _error(400, code, error.problems)

    result = store_event(db, caller.organization_id, event)
    if record_use(db, caller):
        db.commit()
    body: dict[str, Any] = {
        "status": "accepted",
        "lineage": result.lineage.value,
        "jobFacetsUpdated": list(result.job_facets),
        "datasetFacetsUpdated": result.dataset_facets,
    }
    return jsonify(body), 201
