"""The ingest endpoints: ``POST /api/v1/lineage`` (one event, as openlineage-python's HTTP transport and
Marquez clients send it) and ``POST /api/v1/lineage/batch`` (many events in one request).

Both: ``Authorization: Bearer <org API key>`` with the ``lineage:write`` scope; optionally
``Content-Encoding: gzip`` (the client's ``compression: gzip``) and ``X-Organization: <org slug>`` to
make sure the key is the one of the organization you mean. Errors have one shape:
``{"error": code, "message": sentence, "field": path, "problems": [{"field", "code", "message"}]}``.

``POST /api/v1/lineage``: ``Content-Type: application/json`` (or none); one RunEvent, JobEvent or
DatasetEvent, at most ``LINEAGE_MAX_EVENT_BYTES`` (a setting, default 5 MiB) before and after
decompression. 201: stored (or already: posting it again is harmless), and what it did:
``{"status": "accepted", "lineage": "replaced|refreshed|unchanged|stale|not_carried",
"jobFacetsUpdated": [...], "datasetFacetsUpdated": n}``. 4xx: rejected, nothing of it stored. 400
malformed or invalid event (also an event the database refuses: ``invalid_event``, problem code
``rejected_by_database``); 401 missing, invalid or revoked key; 403 ``wrong_organization`` or
``insufficient_scope``; 413 body too large (``payload_too_large``, with or without Content-Length) or
more inputs, outputs, schema fields or column-lineage edges than :mod:`lineage_core.lineage.limits`
allows (``event_too_large``); 415 unsupported Content-Type or Content-Encoding; 429 too many requests
with a bad key from this address or with this key's prefix (``Retry-After``, see :mod:`portal.limits`);
503 the database is unavailable, retry later (the client does).

``POST /api/v1/lineage/batch``: ``Content-Type: application/x-ndjson`` (one event per line, blank lines
ignored) or ``application/json`` (a JSON array of events); at most ``LINEAGE_BATCH_MAX_EVENTS`` events
(default 1000) and ``LINEAGE_BATCH_MAX_BYTES`` (default 16 MiB, before and after decompression), each
event within ``LINEAGE_MAX_EVENT_BYTES`` and the limits. 200 once the batch was read, even if events
were rejected: ``{"status": "read", "accepted": n, "rejected": m, "results": [...]}``, one result per
event in order: ``{"index", "status": "accepted", "lineage", "jobFacetsUpdated",
"datasetFacetsUpdated"}`` (the single endpoint's answer for it) or ``{"index", "status": "rejected",
"httpStatus": 400|413, "error", "message", "field", "problems"}`` (the single endpoint's error for it;
nothing of that event is stored, its neighbours are). 4xx only for the request as a whole: 400
``malformed_body``, 401, 403, 413 ``payload_too_large`` or ``too_many_events``, 415, 429; 503
``database_unavailable``: on PostgreSQL nothing of the batch was stored (SQLite stores event by event);
503 ``server_busy``: this web worker was storing ``LINEAGE_BATCH_CONCURRENCY`` batches (default 2) for
:data:`BATCH_SLOT_WAIT_SECONDS` and did not start this one; nothing of it was stored. A batch waits for
its turn once it is read and its key checked: a worker's memory holds that many batches' parsed events
at most, whatever its threads.

The key comes from this process's key cache (:mod:`lineage_core.accounts.key_cache`) or one indexed
lookup; a looked-up key is read in the transaction that stores (a batch's is committed before its
events are parsed, so that parsing megabytes holds no transaction open), and an answer that stores
nothing commits its read rather than rolling it back, since psycopg forgets its prepared statements at
every ROLLBACK. A request takes a pooled connection only at its first statement and gives it back at
each commit: one whose key is known and whose event another request stores takes none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import (
    AuthenticationError,
    Caller,
    Scope,
    ScopeError,
    authenticate,
    bearer_credential,
    hash_key,
    key_prefix_of,
    parse_bearer,
    record_use,
    require_scope,
)
from lineage_core.accounts.key_cache import KnownKey, cache_for
from lineage_core.infra.config import DEFAULT_LINEAGE_BATCH_CONCURRENCY
from lineage_core.infra.db import get_engine
from lineage_core.infra.models import Organization, utcnow
from lineage_core.lineage.event import Event
from lineage_core.lineage.group_commit import GROUP_COMMIT, CommitHook, GroupStoreError
from lineage_core.lineage.ingest import Refused, StoreResult, store_batch
from lineage_core.lineage.merge import ApplyResult
from lineage_core.lineage.parse import EventError, EventTooLargeError, Problem, parse_event
from portal.api.bodies import (
    DEFAULT_BATCH_MAX_BYTES,
    DEFAULT_BATCH_MAX_EVENTS,
    DEFAULT_MAX_EVENT_BYTES,
    RejectedError,
    batch_mimetype,
    content_encoding,
    decoded,
    payload_too_large,
    read_raw,
    single_event_mimetype,
    split_batch,
)
from portal.database import settings
from portal.extensions import csrf
from portal.limits import api_key_address_limit, bad_key_refused_for_prefix, count_failure
from portal.security import public_endpoint

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "bp"]

ORG_HEADER = "X-Organization"
RETRY_AFTER_SECONDS = "5"
# How long a batch waits for one of its worker's LINEAGE_BATCH_CONCURRENCY turns before its 503.
BATCH_SLOT_WAIT_SECONDS = 30.0

log = logging.getLogger(__name__)

bp = Blueprint("api", __name__, url_prefix="/api/v1")
# Machine clients authenticate with a bearer key on every request and hold no session cookie, so a
# cross-site form cannot act for them: CSRF tokens do not apply to this blueprint.
csrf.exempt(bp)


class _EventRejectedError(Exception):
    """One event is rejected: its HTTP status, error code and problems (the single endpoint's answer)."""

    def __init__(self, status: int, error: str, problems: list[Problem]) -> None:
        super().__init__(problems[0].message)
        self.status = status
        self.error = error
        self.problems = problems


def _error_body(error: str, problems: list[Problem]) -> dict[str, Any]:
    first = problems[0]
    return {
        "error": error,
        "message": first.message,
        "field": first.field,
        "problems": [{"field": p.field, "code": p.code, "message": p.message} for p in problems],
    }


def _error(status: int, error: str, problems: list[Problem]) -> tuple[Response, int]:
    response = jsonify(_error_body(error, problems))
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="openlineage"'
    return response, status


def _accepted_body(result: ApplyResult) -> dict[str, Any]:
    return {
        "status": "accepted",
        "lineage": result.lineage.value,
        "jobFacetsUpdated": list(result.job_facets),
        "datasetFacetsUpdated": result.dataset_facets,
    }


def _config_int(name: str, default: int) -> int:
    return int(current_app.config.get(name, default))


def _max_event_bytes() -> int:
    """The event's limit: ``LINEAGE_MAX_EVENT_BYTES``, never more than the app-wide MAX_CONTENT_LENGTH."""
    limit = _config_int("LINEAGE_MAX_EVENT_BYTES", DEFAULT_MAX_EVENT_BYTES)
    app_limit = current_app.config.get("MAX_CONTENT_LENGTH")
    return min(limit, int(app_limit)) if app_limit else limit


@contextmanager
def _request_session() -> Iterator[Session]:
    """The request's session: it takes a pooled connection at its first statement and gives it back at
    each commit, so a request whose key is known and whose event another request stores (group
    commit) never takes one, and a batch waiting for its turn holds none."""
    session = Session(bind=get_engine(settings().database_url), expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()


def _answering_503(view: Callable[[Session], tuple[Response, int]]) -> tuple[Response, int]:
    try:
        with _request_session() as db:
            return view(db)
    except (DBAPIError, GroupStoreError):  # the latter: another request stored the event's group, and failed
        log.exception("storing lineage events failed")
        # True on both databases: PostgreSQL stored nothing of the request; SQLite (one transaction per
        # event) may have stored some events, which posting them again leaves as they are.
        return _retry_later(
            "database_unavailable",
            "The events could not be stored now. Send them again later: "
            "an event already stored is not stored twice.",
        )


def _retry_later(error: str, message: str) -> tuple[Response, int]:
    """A 503 with ``Retry-After``: nothing was stored, and the same request may succeed later."""
    response, status = _error(503, error, [Problem("body", error, message)])
    response.headers["Retry-After"] = RETRY_AFTER_SECONDS
    return response, status


def _credential() -> str:
    return bearer_credential(request.headers.get("Authorization"))


def _caller(db: Session) -> Caller:
    """The key's caller, allowed to write lineage: from this process's key cache, or one indexed lookup
    in the session's transaction (see :mod:`lineage_core.accounts.key_cache`).

    Raises:
        AuthenticationError: missing, invalid or revoked key.
        RejectedError: 403, the key is of another organization than X-Organization, or lacks the scope.
    """
    expected_org = request.headers.get(ORG_HEADER)
    known = _known_key(db, parse_bearer(request.headers.get("Authorization")), expected_org is not None)
    caller = known.caller
    if expected_org is not None and known.organization_slug != expected_org.strip():
        raise RejectedError(
            403,
            "wrong_organization",
            ORG_HEADER,
            f"This API key belongs to another organization than {expected_org.strip()!r}; "
            "use a key created in that organization.",
        )
    try:
        require_scope(caller, Scope.LINEAGE_WRITE)
    except ScopeError as error:
        raise RejectedError(403, "insufficient_scope", "Authorization", str(error)) from None
    return caller


def _known_key(db: Session, key: str, with_slug: bool) -> KnownKey:
    """The key, from the cache or looked up (and then kept, with its organization's slug, if the cache
    is listening); the slug is read on a lookup only if kept or ``with_slug``."""
    cache = cache_for(settings().database_url)
    key_hash = hash_key(key)
    known = cache.get(key_hash) if cache is not None else None
    if known is not None:
        return known
    generation = cache.generation() if cache is not None else 0
    keeps = cache is not None and cache.listening
    caller = authenticate(db, key)
    slug = None
    if keeps or with_slug:
        slug = db.scalar(select(Organization.slug).where(Organization.id == caller.organization_id))
    known = KnownKey(caller, slug)
    if keeps and cache is not None:
        cache.put(key_hash, known, generation)
    return known


def _refused_request(db: Session, refused: AuthenticationError | RejectedError) -> tuple[Response, int]:
    """The answer to a request refused as a whole (its key, its headers or its body's size); the key's
    read is committed, not rolled back (see the module's text)."""
    db.commit()
    if isinstance(refused, AuthenticationError):
        return _refused_key(refused)
    return _error(refused.status, refused.problem.code, [refused.problem])


def _refused_key(error: AuthenticationError) -> tuple[Response, int]:
    count_failure("api_key")
    prefix = key_prefix_of(_credential())
    refused = bad_key_refused_for_prefix(prefix) if prefix else None
    if refused is not None:
        return refused, 429
    return _error(401, error.reason.value, [Problem("Authorization", error.reason.value, str(error))])


def _parsed(content: bytes) -> Event:
    """One event's bytes, checked. Raises :class:`_EventRejectedError` with the single endpoint's answer."""
    try:
        return parse_event(content)
    except EventTooLargeError as error:
        raise _EventRejectedError(413, "event_too_large", error.problems) from None
    except EventError as error:
        code = "malformed_json" if error.problems[0].code == "malformed_json" else "invalid_event"
        raise _EventRejectedError(400, code, error.problems) from None


def _refusal(refused: Refused) -> _EventRejectedError:
    return _EventRejectedError(
        400, "invalid_event", [Problem("body", "rejected_by_database", refused.reason)]
    )


def _recording_use(caller: Caller) -> CommitHook:
    """The key's last use, written in the transaction that stores (at most once a minute), and noted in
    this process's key cache once that transaction committed."""
    cache = cache_for(settings().database_url)
    # Taken now, in the request's own context: the hook may run in another request's thread (the one
    # that stores the group).
    key_hash = hash_key(_credential())
    written: list[datetime] = []  # when the last attempt of the transaction wrote it

    def record(session: Session) -> None:
        written.clear()  # a retried transaction runs this again
        now = utcnow()
        if record_use(session, caller, now):
            written.append(now)

    def note() -> None:
        if written and cache is not None:
            cache.note_use(key_hash, written[0])

    return CommitHook(("api_key", caller.api_key_id), record, note)


@bp.post("/lineage")
@public_endpoint
@api_key_address_limit
def ingest_lineage() -> tuple[Response, int]:
    return _answering_503(_ingest_one)


def _ingest_one(db: Session) -> tuple[Response, int]:
    limit = _max_event_bytes()
    try:
        single_event_mimetype()
        encoding = content_encoding()
        raw = read_raw(limit, "The event")  # before the transaction: a slow client holds none open
        caller = _caller(db)
        event = _parsed(decoded(raw, encoding, limit, "The event"))
    except (AuthenticationError, RejectedError) as refused:
        return _refused_request(db, refused)
    except _EventRejectedError as rejected:
        db.commit()
        return _error(rejected.status, rejected.error, rejected.problems)

    # Requests of the same organization that arrive together share one transaction (group commit).
    result = GROUP_COMMIT.store(db, caller.organization_id, event, _recording_use(caller))
    if isinstance(result, Refused):
        refusal = _refusal(result)
        return _error(refusal.status, refusal.error, refusal.problems)
    return jsonify(_accepted_body(result)), 201


@bp.post("/lineage/batch")
@public_endpoint
@api_key_address_limit
def ingest_lineage_batch() -> tuple[Response, int]:
    return _answering_503(_ingest_batch)


def _ingest_batch(db: Session) -> tuple[Response, int]:
    max_bytes = _config_int("LINEAGE_BATCH_MAX_BYTES", DEFAULT_BATCH_MAX_BYTES)
    try:
        mimetype = batch_mimetype()
        encoding = content_encoding()
        raw = read_raw(max_bytes, "The batch")
        caller = _caller(db)
        db.commit()  # parsing megabytes of events holds no transaction open
    except (AuthenticationError, RejectedError) as refused:
        return _refused_request(db, refused)
    owned = [raw]  # handed over: the body's memory goes as soon as it is decoded (not held here)
    del raw
    with _batch_turn() as turn:
        if not turn:
            return _busy()
        return _store_read_batch(db, caller, owned, mimetype, encoding, max_bytes)


_BATCH_TURNS = "lineage_batch_turns"  # the app's extension: the semaphore of its turns


@contextmanager
def _batch_turn() -> Iterator[bool]:
    """One of this process's LINEAGE_BATCH_CONCURRENCY turns to decode, check and store a batch; False
    if none came within :data:`BATCH_SLOT_WAIT_SECONDS`."""
    turns = current_app.extensions.get(_BATCH_TURNS)
    if turns is None:  # the app's first batch; setdefault: two threads at once get the same one
        count = _config_int("LINEAGE_BATCH_CONCURRENCY", DEFAULT_LINEAGE_BATCH_CONCURRENCY)
        turns = current_app.extensions.setdefault(_BATCH_TURNS, threading.BoundedSemaphore(count))
    if not turns.acquire(timeout=BATCH_SLOT_WAIT_SECONDS):
        yield False
        return
    try:
        yield True
    finally:
        turns.release()


def _busy() -> tuple[Response, int]:
    log.warning("a lineage batch waited %.0f s for a turn and was refused", BATCH_SLOT_WAIT_SECONDS)
    return _retry_later(
        "server_busy",
        "This server is storing as many batches as it stores at once. "
        "Send the batch again in a few seconds: nothing of it was stored.",
    )


def _store_read_batch(
    db: Session, caller: Caller, owned: list[bytes], mimetype: str, encoding: str, max_bytes: int
) -> tuple[Response, int]:
    """The batch read (``owned``: its body, taken from the list) decoded, split, checked and stored."""
    raw = owned.pop()
    try:
        body = decoded(raw, encoding, max_bytes, "The batch")
        del raw
        items = split_batch(
            body,
            mimetype,
            _config_int("LINEAGE_BATCH_MAX_EVENTS", DEFAULT_BATCH_MAX_EVENTS),
            _max_event_bytes(),
        )
        del body
    except RejectedError as rejected:
        return _error(rejected.status, rejected.problem.code, [rejected.problem])

    event_limit = _max_event_bytes()
    answers: list[dict[str, Any] | None] = [None] * len(items)
    events: list[Event] = []
    positions: list[int] = []
    for index, item in enumerate(items):
        try:
            if item.content is None:
                too_large = payload_too_large(event_limit)
                raise _EventRejectedError(413, too_large.problem.code, [too_large.problem])
            events.append(_parsed(item.content))
            positions.append(index)
        except _EventRejectedError as error:
            answers[index] = _rejected_answer(index, error)
    del items

    key_use = _recording_use(caller)
    stored: list[StoreResult] = store_batch(
        db,
        caller.organization_id,
        events,
        before_commit=key_use.before,
        after_commit=[key_use.after] if key_use.after else [],
    )
    for index, result in zip(positions, stored, strict=True):
        if isinstance(result, Refused):
            answers[index] = _rejected_answer(index, _refusal(result))
        else:
            answers[index] = {"index": index, **_accepted_body(result)}
    results = [answer for answer in answers if answer is not None]
    accepted = sum(answer["status"] == "accepted" for answer in results)
    answer = {"status": "read", "accepted": accepted, "rejected": len(results) - accepted, "results": results}
    return jsonify(answer), 200


def _rejected_answer(index: int, error: _EventRejectedError) -> dict[str, Any]:
    return {
        "index": index,
        "status": "rejected",
        "httpStatus": error.status,
        **_error_body(error.error, error.problems),
    }
