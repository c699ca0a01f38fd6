"""``/audit/``: the audit trail. Org admins read their organization's; operators search every
organization's by organization, actor and action."""

from __future__ import annotations

from flask import Blueprint, abort, render_template, request
from flask_login import current_user

from lineage_core.ops.audit import Action, search
from portal.database import get_db

bp = Blueprint("audit", __name__, url_prefix="/audit")
PAGE_SIZE = 100
_FILTER_MAX = 320


def _arg(name: str) -> str:
    return (request.args.get(name) or "").strip()[:_FILTER_MAX]


@bp.get("/")
def index() -> str:
    if not (current_user.is_org_admin or current_user.is_operator):
        abort(403)
    before = request.args.get("before", type=int)
    if before is not None and not 0 < before < 2**63:
        before = None
    filters = {"actor": _arg("actor"), "action": _arg("action"), "org": _arg("org")}
    if current_user.is_operator:
        rows = search(
            get_db(),
            organization_slug=filters["org"] or None,
            actor=filters["actor"] or None,
            action=filters["action"] or None,
            limit=PAGE_SIZE,
            before_id=before,
        )
    else:
        # An org admin's filters never widen past their own organization.
        rows = search(
            get_db(),
            organization_id=int(current_user.organization_id),
            actor=filters["actor"] or None,
            action=filters["action"] or None,
            limit=PAGE_SIZE,
            before_id=before,
        )
    return render_template(
        "audit/index.html",
        rows=rows,
        filters=filters,
        actions=[action.value for action in Action],
        next_before=rows[-1].event.id if len(rows) == PAGE_SIZE else None,
    )
