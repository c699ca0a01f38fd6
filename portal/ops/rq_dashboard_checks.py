"""rq-dashboard's own needs and gaps, for the mount in :mod:`portal.ops.rq_dashboard_mount`.

* **Its Content-Security-Policy.** rq-dashboard renders its tables in the browser from Underscore
  templates (``_.template`` compiles them with ``new Function``, which CSP counts as ``eval``) and runs
  an inline ``<script>`` block and inline styles. The app's policy (:mod:`portal.headers`) forbids all
  three, so under it every table says "Loading..." forever; :mod:`portal.headers` leaves this
  blueprint out and this module gives it a policy of its own: ``'unsafe-inline'`` and
  ``'unsafe-eval'`` for scripts, on these operator-only pages behind our login, and otherwise as
  strict as the app's (own origin only, no plugins, no framing, forms post only to us).
* **404, not 500, for what does not exist.** Its views raise on a job id Redis does not hold
  (``NoSuchJobError``), on a registry name it does not know, on non-numeric paging and on a Redis
  instance number past the one we configure; it renders any queue name at all. Those requests answer
  404 here before (or instead of) reaching its code.
"""

from __future__ import annotations

from contextlib import suppress

from flask import Flask, Response, abort, current_app, jsonify, request
from flask_login import current_user
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import NoSuchJobError
from werkzeug.exceptions import NotFound

from portal.database import settings
from portal.errors import render_error

BLUEPRINT = "rq_dashboard"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# The registries rq-dashboard can list (its get_queue_registry_jobs_count); any other name fails there.
REGISTRIES = frozenset({"queued", "failed", "deferred", "started", "finished", "scheduled", "canceled"})
ORDERS = frozenset({"asc", "dsc"})


def _known_queues() -> set[str]:
    configured = settings()
    names = {configured.schedule_queue, configured.derive_queue, configured.export_queue}
    with suppress(RedisError):  # rq-dashboard's own view then says it cannot connect
        names.update(queue.name for queue in Queue.all(connection=current_app.redis_conn))  # type: ignore[attr-defined]
    return names


def _not_found(message: str) -> Response:
    if request.path.endswith(".json"):
        response = jsonify(error="not_found", message=message)
        response.status_code = 404
        return response
    abort(404, description=message)


def _check_exists() -> Response | None:
    if request.blueprint != BLUEPRINT or not (current_user.is_authenticated and current_user.is_operator):
        return None  # the mount's guard answers everyone else, whatever order the hooks run in
    args = request.view_args or {}
    if args.get("instance_number", 0) != 0:
        return _not_found("There is one Redis here: instance 0.")
    registry = args.get("registry_name")
    if registry is not None and registry not in REGISTRIES:
        return _not_found(f"No registry {registry!r}.")
    for name in ("per_page", "page"):
        value = args.get(name)
        if value is not None and not str(value).isdigit():
            return _not_found(f"{name} must be a number.")
    order = args.get("order")
    if order is not None and order not in ORDERS:
        return _not_found("order must be asc or dsc.")
    queue = args.get("queue_name")
    if queue is not None and queue not in _known_queues():
        return _not_found(f"No queue {queue!r}.")
    return None


def _no_such_job(error: NoSuchJobError) -> tuple[Response | str, int]:
    if request.blueprint != BLUEPRINT:
        raise error
    # An error handler cannot abort(): render the portal's 404 (JSON for the .json views) directly.
    return render_error(NotFound("No such job: it finished and expired, or never existed."))


def _dashboard_csp(response: Response) -> Response:
    if request.blueprint == BLUEPRINT:
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return response


def init_app(app: Flask) -> None:
    app.after_request(_dashboard_csp)
    app.register_error_handler(NoSuchJobError, _no_such_job)
    app.before_request(_check_exists)
