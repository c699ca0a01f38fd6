"""The web side of the logs: a request id per request, in the ``X-Request-ID`` response header, on
every log line of the request and on the RQ jobs it enqueues (``lineage_core.infra.logs``); JSON lines
on standard error, and one line per request (method, path without query string, status, duration).
"""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request

from lineage_core.infra.logs import configure_json_logging, new_request_id, reset_request_id, set_request_id

REQUEST_ID_HEADER = "X-Request-ID"

log = logging.getLogger("portal.request")


def request_id() -> str | None:
    """The current request's id (None outside a request)."""
    value = g.get("request_id")
    return value if isinstance(value, str) else None


def _start() -> None:
    g.request_id = new_request_id(request.headers.get(REQUEST_ID_HEADER))
    g.request_id_token = set_request_id(g.request_id)
    g.request_started = time.perf_counter()


def _finish(response: Response) -> Response:
    if "request_id" in g:
        response.headers[REQUEST_ID_HEADER] = g.request_id
        # The path only: query strings may carry what a log must not (a typed e-mail in ?next=...).
        log.info(
            "%s %s %s",
            request.method,
            request.path,
            response.status_code,
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - g.request_started) * 1000, 1),
                "endpoint": request.endpoint,
            },
        )
    return response


def _teardown(_error: BaseException | None) -> None:
    token = g.pop("request_id_token", None)
    if token is not None:
        reset_request_id(token)


def init_app(app: Flask) -> None:
    # First of the before_request hooks, so that the login check and the rate limits log with the id.
    app.before_request_funcs.setdefault(None, []).insert(0, _start)
    app.after_request(_finish)
    app.teardown_request(_teardown)
    if not app.testing:
        configure_json_logging(logging.INFO)
