"""Pages for operators (vendor staff): every organization's connectors, queues and workers."""

from __future__ import annotations

from flask import Blueprint, render_template, request
from redis.exceptions import RedisError

from lineage_core.export.queue import redis_connection
from lineage_core.lineage.derivation_status import derivation_counts, derivation_counts_by_organization
from lineage_core.ops.heartbeats import tick_health
from lineage_core.ops.status import connector_health, queue_health, worker_health
from portal.database import get_db, settings
from portal.security import operator_required

bp = Blueprint("ops", __name__, url_prefix="/ops")
PAGE_SIZE = 200
MAX_PAGE = 1_000_000


@bp.get("/")
@operator_required
def index() -> str:
    # Bounded: OFFSET is a bigint, and a page past the last one is simply empty.
    page = min(max(request.args.get("page", 1, type=int) or 1, 1), MAX_PAGE)
    rows = connector_health(get_db(), limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    connection = redis_connection(settings())
    try:
        queues, workers, redis_error = queue_health(settings(), connection), worker_health(connection), None
    except RedisError as error:
        queues, workers, redis_error = [], [], f"Redis is unreachable: {type(error).__name__}"
    finally:
        connection.close()
    return render_template(
        "ops/index.html",
        rows=rows,
        queues=queues,
        workers=workers,
        redis_error=redis_error,
        page=page,
        page_size=PAGE_SIZE,
        derivations=derivation_counts(get_db()),
        derivations_by_org=derivation_counts_by_organization(get_db()),
        tick=tick_health(get_db()),
    )
