"""The connector card's live status and the confirmation before Delete.

``GET /integrations/openlineage/<id>/status.json`` is what the card polls (``static/card-status.js``)
while an export is queued or running: the same login, org-admin check and tenant isolation as the card
(another organization's connector is a 404), and no more than the card shows.

``GET /integrations/openlineage/<id>/delete`` says what deleting loses before the admin confirms; the
confirming POST is the card's old Delete route in ``views``.

``POST …/<id>/rotate-external-id`` and ``POST …/<id>/cancel-rotation``: the card's "Rotate External ID"
and "Cancel rotation" (lineage_core.setup.rotations), each a CSRF-checked form of an org admin, for the
admin's own connectors only, audited. A refused rotation (one is under way, the connection was never
saved) comes back as the refusal's sentence on the card.
"""

from __future__ import annotations

import re

from flask import Response, abort, flash, jsonify, redirect, render_template, url_for
from markupsafe import Markup, escape
from sqlalchemy import func, select
from werkzeug.wrappers.response import Response as BaseResponse

from lineage_core.infra.models import Connector, ExportRun
from lineage_core.ops.audit import Action
from lineage_core.setup import connectors, rotations
from lineage_core.setup.destination import s3_url
from portal.audit import audit
from portal.database import get_db
from portal.integrations import bp, connector_or_404
from portal.integrations.card import RotationCard, card_view, rotation_card
from portal.integrations.forms import ConfirmForm
from portal.security import org_admin_required

ROTATION_STARTED = (
    "A new External ID is ready. Download the template again, update the stack with it, then click "
    "Save. Until Save passes, exports keep using the current External ID."
)
ROTATION_CANCELLED = (
    "Rotation cancelled. Foundational keeps using the current External ID, and the downloads carry only "
    "it again. If you already updated the stack with both IDs, update it again to drop the new one."
)

# After a separator, or inside a CamelCase name (FoundationalOpenLineageExport) between its words.
_BREAKS = re.compile(r"([/.:_-])|(?<=[a-z])(?=[A-Z])", re.ASCII)


@bp.get("/openlineage/<int:connector_id>/status.json")
@org_admin_required
def card_status(connector_id: int) -> Response:
    connector = connector_or_404(connector_id)
    view = card_view(connector, connectors.card_status(get_db(), connector.id))
    response = jsonify(view.as_json())
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.get("/openlineage/<int:connector_id>/delete")
@org_admin_required
def confirm_delete(connector_id: int) -> str:
    connector = connector_or_404(connector_id)
    exports = get_db().scalar(
        select(func.count()).select_from(ExportRun).where(ExportRun.connector_id == connector.id)
    )
    return render_template(
        "integrations/delete.html",
        connector=connector,
        form=ConfirmForm(),
        exports=exports,
        location=s3_url(connector.bucket, connector.prefix) if connector.bucket else None,
        export_url=(
            s3_url(connector.bucket, connector.prefix, "openlineage-events.jsonl")
            if connector.bucket
            else None
        ),
    )


@bp.app_template_filter("breakable")
def breakable(value: object) -> Markup:
    """``value`` escaped, with a line-break opportunity after each ``/ . : _ -`` and between CamelCase words.

    Bucket names, prefixes and ARNs have no spaces: in a narrow card the browser would either overflow
    or cut them anywhere, mid-word. ``<wbr>`` lets them wrap at their own separators instead (and is
    not copied with the text).
    """
    # Safe: the text is escaped first, and only <wbr> is added (after characters escaping never makes).
    return Markup(_BREAKS.sub(lambda match: (match.group(1) or "") + "<wbr>", str(escape(value))))  # noqa: S704


@bp.post("/openlineage/<int:connector_id>/rotate-external-id")
@org_admin_required
def rotate_external_id(connector_id: int) -> BaseResponse:
    connector = connector_or_404(connector_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    try:
        rotations.start_rotation(get_db(), connector)
    except rotations.RotationError as error:
        get_db().rollback()
        flash(str(error), "error")
        return _back_to_card(connector)
    audit(Action.ROTATION_STARTED, target_type="connector", target_id=connector.id)
    get_db().commit()
    flash(ROTATION_STARTED, "success")
    return _back_to_card(connector)


@bp.post("/openlineage/<int:connector_id>/cancel-rotation")
@org_admin_required
def cancel_rotation(connector_id: int) -> BaseResponse:
    connector = connector_or_404(connector_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    try:
        rotations.cancel_rotation(get_db(), connector)
    except rotations.RotationError as error:
        get_db().rollback()
        flash(str(error), "error")
        return _back_to_card(connector)
    audit(Action.ROTATION_CANCELLED, target_type="connector", target_id=connector.id)
    get_db().commit()
    flash(ROTATION_CANCELLED, "success")
    return _back_to_card(connector)


def _back_to_card(connector: Connector) -> BaseResponse:
    return redirect(url_for(".accounts", _anchor=f"connector-{connector.id}"))


_CARD_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", re.ASCII)


@bp.app_template_filter("times_unbroken")
def times_unbroken(value: object) -> Markup:
    """``value`` escaped, each card time in it (``2026-12-01 09:30 UTC``) kept on one line.

    A date must not break at its hyphens (the cards' rule, see style.css ``.nowrap``).
    """
    # Safe: the text is escaped first; the span wraps characters the pattern matched (digits, -, :, UTC).
    escaped = str(escape(value))
    return Markup(_CARD_TIME.sub(lambda match: f'<span class="nowrap">{match.group(0)}</span>', escaped))  # noqa: S704


@bp.app_template_global("rotation_card")
def rotation_card_for(connector: Connector) -> RotationCard:
    """The External ID part of a connector's card (and of its deploy page), for the templates."""
    return rotation_card(connector)
