"""The connector card's live status and the confirmation before Delete.

``GET /integrations/openlineage/<id>/status.json`` is what the card polls (``static/card-status.js``)
while an export is queued or running: the same login, org-admin check and tenant isolation as the card
(another organization's connector is a 404), and no more than the card shows.

``GET /integrations/openlineage/<id>/delete`` says what deleting loses before the admin confirms; the
confirming POST is the card's old Delete route in ``views``.
"""

from __future__ import annotations

import re

from flask import Response, jsonify, render_template
from markupsafe import Markup, escape
from sqlalchemy import func, select

from lineage_core.infra.models import ExportRun
from lineage_core.setup import connectors
from lineage_core.setup.destination import s3_url
from portal.database import get_db
from portal.integrations import bp, connector_or_404
from portal.integrations.card import card_view
from portal.integrations.forms import ConfirmForm
from portal.security import org_admin_required

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
