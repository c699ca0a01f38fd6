"""/healthz for load balancers and /metrics for Prometheus."""

from __future__ import annotations

import hmac

from flask import Blueprint, Response, abort, jsonify, request
from flask_login import current_user
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from lineage_core.export.queue import redis_connection
from lineage_core.ops.heartbeats import tick_health
from lineage_core.ops.metrics import ServiceCollector
from portal.database import get_db, settings
from portal.limits import AbuseCollector
from portal.security import public_endpoint

bp = Blueprint("ops_health", __name__)


@bp.get("/healthz")
@public_endpoint
def healthz() -> tuple[Response, int]:
    """200 when the database and Redis answer; 503 naming the one that does not.

    The schedule's health rides along without failing the check (a load balancer must not take the
    portal away because the scheduler stalled): ``"schedule": "late"`` and status ``degraded`` when
    the tick last ran more than 15 minutes ago, with ``last_tick_at``. Reveals nothing else.
    """
    checks: dict[str, str] = {}
    last_tick_at: str | None = None
    schedule_late = False
    try:
        get_db().execute(text("SELECT 1"))
        checks["database"] = "ok"
        tick = tick_health(get_db())
        schedule_late = tick.late
        last_tick_at = tick.last_at.isoformat() if tick.last_at else None
    except SQLAlchemyError:
        checks["database"] = "unreachable"
    connection = redis_connection(settings())
    try:
        connection.ping()
        checks["redis"] = "ok"
    except RedisError:
        checks["redis"] = "unreachable"
    finally:
        connection.close()
    healthy = all(value == "ok" for value in checks.values())
    if checks["database"] == "ok":
        checks["schedule"] = "late" if schedule_late else "ok"
    status = "unhealthy" if not healthy else "degraded" if schedule_late else "ok"
    return jsonify(status=status, checks=checks, last_tick_at=last_tick_at), 200 if healthy else 503


@bp.get("/metrics")
@public_endpoint
def metrics() -> Response:
    """Prometheus text format. A scraper sends ``Authorization: Bearer $METRICS_TOKEN``; operators may
    also open it signed in. Without a configured token only signed-in operators get it."""
    if not _authorised():
        abort(401 if not current_user.is_authenticated else 403)
    registry = CollectorRegistry()
    registry.register(ServiceCollector(get_db(), settings()))
    registry.register(AbuseCollector(settings().redis_url))
    # content_type, not mimetype: CONTENT_TYPE_LATEST carries its charset, which mimetype would repeat.
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def _authorised() -> bool:
    if current_user.is_authenticated and current_user.is_operator:
        return True
    token = settings().metrics_token
    supplied = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(supplied.encode(), f"Bearer {token}".encode())
