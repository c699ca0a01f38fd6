"""rq-dashboard at /admin/rq, for operators only.

rq-dashboard has no authentication of its own, posts forms without CSRF tokens, and its requeue-all
route also answers GET (a link in a page, or a prefetch, would requeue every failed job). So: the
app's own login and an operator check guard it, CSRF is exempted only for this blueprint behind that
guard, and GET on requeue-all is refused.
"""

from __future__ import annotations

from flask import Flask, Response, abort, request
from flask_login import current_user
from rq_dashboard import web as rq_dashboard_web

from lineage_core.ops.audit import Action
from portal.extensions import csrf
from portal.ops import rq_dashboard_checks

URL_PREFIX = "/admin/rq"


def _guard() -> None:
    if request.blueprint != "rq_dashboard":
        return
    if not current_user.is_authenticated or not current_user.is_operator:
        abort(403)
    if request.endpoint == "rq_dashboard.requeue_all" and request.method != "POST":
        abort(405)


def _audit_queue_action(response: Response) -> Response:
    """An operator's requeue, delete or empty in rq-dashboard goes into the audit trail."""
    if request.blueprint == "rq_dashboard" and request.method == "POST" and response.status_code < 400:
        from portal.audit import audit
        from portal.database import get_db

        details = {
            "endpoint": request.endpoint or "",
            **{k: str(v) for k, v in (request.view_args or {}).items()},
        }
        audit(Action.QUEUE_ACTION, details=details)
        get_db().commit()
    return response


def init_app(app: Flask, redis_url: str) -> None:
    # Its own CSP (it needs eval) and 404s for missing jobs and queues: see rq_dashboard_checks.
    rq_dashboard_checks.init_app(app)
    app.config["RQ_DASHBOARD_REDIS_URL"] = redis_url
    rq_dashboard_web.setup_rq_connection(app)
    app.register_blueprint(rq_dashboard_web.blueprint, url_prefix=URL_PREFIX)
    csrf.exempt(rq_dashboard_web.blueprint)
    # An app-level hook: blueprint.before_request would add the hook again each time a factory runs.
    app.before_request(_guard)
    app.after_request(_audit_queue_action)
