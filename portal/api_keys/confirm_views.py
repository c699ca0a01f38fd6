"""The confirmation before an API key is revoked: what stops working, and that it cannot be undone.

``GET /api-keys/<id>/revoke`` shows it; its button posts to the revoke route in ``views``. Another
organization's key is a 404 here too.
"""

from __future__ import annotations

from flask import abort, render_template

from lineage_core.accounts.api_keys import list_api_keys
from portal.api_keys.forms import RevokeApiKeyForm
from portal.api_keys.views import _org_id, bp
from portal.database import get_db
from portal.security import org_admin_required


@bp.get("/<int:key_id>/revoke")
@org_admin_required
def confirm_revoke(key_id: int) -> str:
    key = next((key for key in list_api_keys(get_db(), _org_id()) if key.id == key_id), None)
    if key is None or key.revoked_at is not None:
        abort(404)
    return render_template("api_keys/revoke.html", key=key, form=RevokeApiKeyForm())
