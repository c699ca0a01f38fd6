"""Pages for operators (vendor staff): every organization's connectors at a glance."""

from __future__ import annotations

from flask import Blueprint, render_template
from sqlalchemy import select

from lineage_core.connectors import last_run
from lineage_core.models import Connector, Organization
from portal.database import get_db
from portal.security import operator_required

bp = Blueprint("ops", __name__, url_prefix="/ops")


@bp.get("/")
@operator_required
def index() -> str:
    db = get_db()
    rows = db.execute(
        select(Connector, Organization.slug).join(Organization).order_by(Organization.slug, Connector.id)
    ).all()
    items = [(connector, slug, last_run(db, connector.id)) for connector, slug in rows]
    return render_template("ops/index.html", items=items)
