"""Logs as JSON lines, each with the request id of the web request it belongs to or that caused it.

One object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``request_id`` when
known, ``exception`` with the traceback when there is one, and any ``extra={...}`` fields a caller
passed. The web process sets the request id per request (``portal.logging``); a job enqueued during a
request carries it in its RQ ``meta`` and every line the job logs in the worker shows it
(:class:`RequestIdFilter` reads the running job's meta).
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import threading
import traceback
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

REQUEST_ID_META = "request_id"
_REQUEST_ID = re.compile(r"\A[A-Za-z0-9._-]{8,64}\Z", re.ASCII)
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "request_id", "taskName"}


def new_request_id(offered: str | None = None) -> str:
    """The id of a new request: the one a proxy or client offered when it is well-formed, else a new one."""
    if offered and _REQUEST_ID.match(offered):
        return offered
    return uuid.uuid4().hex


def set_request_id(request_id: str | None) -> contextvars.Token[str | None]:
    return _current.set(request_id)


def reset_request_id(token: contextvars.Token[str | None]) -> None:
    _current.reset(token)


def current_request_id() -> str | None:
    """The request id of this context: the web request's, or the running RQ job's."""
    request_id = _current.get()
    if request_id is not None:
        return request_id
    return _job_request_id()


def job_meta() -> dict[str, str]:
    """The ``meta`` to enqueue a job with, so that its log lines carry this request's id."""
    request_id = current_request_id()
    return {REQUEST_ID_META: request_id} if request_id else {}


# The running job's request id, for the threads the job starts (RQ's current job is per thread). RQ
# runs a job in the main thread of its work horse; between jobs the main thread clears this.
_threads_job_request_id: str | None = None


def _job_request_id() -> str | None:
    global _threads_job_request_id
    try:
        from rq import get_current_job

        job = get_current_job()
    except Exception:  # outside a job, or a connection problem: no id, never a failed log line
        job = None
    on_main_thread = threading.current_thread() is threading.main_thread()
    if job is None:
        if on_main_thread:
            _threads_job_request_id = None
            return None
        return _threads_job_request_id
    value = job.meta.get(REQUEST_ID_META)
    request_id = value if isinstance(value, str) else None
    if on_main_thread:
        _threads_job_request_id = request_id
    return request_id


class RequestIdFilter(logging.Filter):
    """Puts ``request_id`` on every record (None outside any request or job)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in entry:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = "".join(traceback.format_exception(*record.exc_info))
        return orjson.dumps(entry, default=str).decode()


def json_handler(stream: Any = None) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    return handler


def configure_json_logging(level: int = logging.INFO) -> None:
    """Make the root logger write JSON lines to standard error (replacing its handlers). Idempotent.

    RQ's worker adds its own handler to the ``rq.worker`` logger only when none is configured, so its
    lines ("Job OK", "Moving job to FailedJobRegistry") come out as JSON too, with the job's request id.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(json_handler())
    root.setLevel(level)
