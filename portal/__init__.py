"""The admin portal: a Flask application factory.

``flask --app portal run`` (or gunicorn ``portal:create_app()``) builds the app from environment
settings; tests pass ``settings`` and ``test_config`` explicitly.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask, redirect, url_for
from flask_login import current_user
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.wrappers.response import Response

from lineage_core.infra.config import ConfigError, Settings
from lineage_core.infra.process import limit_malloc_arenas, settle_garbage_collector
from portal import database, headers, limits, security
from portal import logging as portal_logging
from portal.converters import DatabaseIdConverter
from portal.extensions import csrf, login_manager


def create_app(test_config: dict[str, Any] | None = None, settings: Settings | None = None) -> Flask:
    app = Flask(__name__)
    if settings is None:
        try:
            settings = Settings.from_env()
        except ConfigError as error:
            # One line naming the variable, not a traceback, under `flask` and gunicorn alike.
            raise SystemExit(f"portal: {error}") from error
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SETTINGS=settings,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=not settings.local_mode,
        REMEMBER_COOKIE_HTTPONLY=True,
        MAX_CONTENT_LENGTH=5 * 1024 * 1024,
        WTF_CSRF_TIME_LIMIT=None,  # tied to the session; a wizard left open for a while still saves
        # A copied session cookie stops verifying 12 hours after it was signed, whatever else happens.
        PERMANENT_SESSION_LIFETIME=timedelta(hours=12),
        LOGIN_LIMIT_PER_ACCOUNT=settings.login_limit_per_account,
        LOGIN_LIMIT_PER_ADDRESS=settings.login_limit_per_address,
        API_KEY_LIMIT_PER_ADDRESS=settings.api_key_limit_per_address,
        API_KEY_LIMIT_PER_PREFIX=settings.api_key_limit_per_prefix,
        LINEAGE_MAX_EVENT_BYTES=settings.lineage_max_event_bytes,
        LINEAGE_BATCH_MAX_EVENTS=settings.lineage_batch_max_events,
        LINEAGE_BATCH_MAX_BYTES=settings.lineage_batch_max_bytes,
        LINEAGE_BATCH_CONCURRENCY=settings.lineage_batch_concurrency,
    )
    if test_config:
        app.config.update(test_config)
    if settings.proxy_hops:
        # The client's address as the load balancers in front of us saw it (rate limits, audit trail).
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=settings.proxy_hops, x_proto=settings.proxy_hops
        )

    # Before any blueprint adds its rules: every <int:...> in the URL map is a bounded database id.
    app.url_map.converters["int"] = DatabaseIdConverter
    csrf.init_app(app)
    login_manager.init_app(app)
    database.init_app(app)
    portal_logging.init_app(app)
    security.init_app(app)
    headers.init_app(app)
    limits.init_app(app)

    from portal import cli
    from portal.api.connections import bp as connections_api_bp
    from portal.api.openapi_views import bp as openapi_bp
    from portal.api.views import bp as api_bp
    from portal.api_keys.views import bp as api_keys_bp
    from portal.audit.views import bp as audit_bp
    from portal.auth.views import bp as auth_bp
    from portal.integrations import bp as integrations_bp
    from portal.ops import rq_dashboard_mount
    from portal.ops.health import bp as ops_health_bp
    from portal.ops.views import bp as ops_bp

    app.register_blueprint(auth_bp)
    app.register_blueprint(integrations_bp)
    app.register_blueprint(ops_bp)
    app.register_blueprint(ops_health_bp)
    rq_dashboard_mount.init_app(app, settings.redis_url)
    app.register_blueprint(api_bp)
    app.register_blueprint(connections_api_bp)
    app.register_blueprint(openapi_bp)
    app.register_blueprint(api_keys_bp)
    app.register_blueprint(audit_bp)
    cli.init_app(app)

    @app.get("/")
    def index() -> Response:
        if current_user.is_operator:
            return redirect(url_for("ops.index"))
        return redirect(url_for("integrations.index"))

    from portal import errors

    errors.init_app(app)  # 403, 404, 500 pages in the portal's layout
    if not app.testing:
        # A web worker (or a `flask` command) builds one app for its whole life; tests build hundreds in
        # one process, where freezing each one's objects would keep them all.
        settle_garbage_collector()
        limit_malloc_arenas()  # before the worker starts its threads
    return app
