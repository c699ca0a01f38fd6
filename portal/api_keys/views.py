"""API keys page: org admins create keys (shown once) with the scopes they choose, list them, revoke them."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask_login import current_user
from werkzeug.wrappers.response import Response

from lineage_core.accounts.api_keys import (
    ApiKeyError,
    Scope,
    create_api_key,
    list_api_keys,
    parse_scopes,
    revoke_api_key,
)
from lineage_core.ops.audit import Action
from portal.api_keys.forms import CreateApiKeyForm, RevokeApiKeyForm
from portal.audit import audit
from portal.database import get_db
from portal.security import org_admin_required

bp = Blueprint("api_keys", __name__, url_prefix="/api-keys")


def _org_id() -> int:
    return int(current_user.organization_id)


def _index_page(form: CreateApiKeyForm, status: int = 200) -> tuple[str, int]:
    keys = list_api_keys(get_db(), _org_id())
    return (
        render_template(
            "api_keys/index.html",
            keys=keys,
            form=form,
            revoke_form=RevokeApiKeyForm(),
            ingest_url=url_for("api.ingest_lineage", _external=True),
            connections_url=url_for("connections_api.list_connections", _external=True),
            scopes_of=parse_scopes,
        ),
        status,
    )


@bp.get("/")
@org_admin_required
def index() -> tuple[str, int]:
    return _index_page(CreateApiKeyForm())


@bp.post("/")
@org_admin_required
def create() -> tuple[str, int] | Response:
    form = CreateApiKeyForm()
    if not form.validate_on_submit():
        return _index_page(form, 422)
    db = get_db()
    try:
        new_key = create_api_key(db, _org_id(), form.name.data or "", form.chosen_scopes())
    except ApiKeyError as error:
        form[error.field].errors = [str(error)]
        return _index_page(form, 422)
    audit(
        Action.API_KEY_CREATED,
        target_type="api_key",
        target_id=new_key.id,
        details={"name": new_key.name, "key_prefix": new_key.prefix, "scopes": sorted(new_key.scopes)},
    )
    db.commit()
    # The secret is rendered in this response only, never redirected through the session (Flask's
    # session cookie is signed, not encrypted) and never cached.
    page = render_template(
        "api_keys/created.html",
        new_key=new_key,
        ingest_url=url_for("api.ingest_lineage", _external=True),
        connections_url=url_for("connections_api.list_connections", _external=True),
        docs_url=url_for("api_docs.openapi_json", _external=True),
        Scope=Scope,
    )
    response = Response(page, status=201, mimetype="text/html")  # not Response's text/plain
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/<int:key_id>/revoke")
@org_admin_required
def revoke(key_id: int) -> Response:
    form = RevokeApiKeyForm()
    if not form.validate_on_submit():
        abort(400)
    db = get_db()
    # Another organization's key is indistinguishable from one that does not exist.
    key = revoke_api_key(db, _org_id(), key_id)
    if key is None:
        abort(404)
    audit(
        Action.API_KEY_REVOKED,
        target_type="api_key",
        target_id=key.id,
        details={"name": key.name, "key_prefix": key.prefix},
    )
    db.commit()
    flash(f"Key {key.name} ({key.prefix}…) is revoked: requests using it are now refused.", "success")
    return redirect(url_for(".index"))


# The confirmation page before Revoke, registered on ``bp`` once it exists.
from portal.api_keys import confirm_views  # noqa: E402, F401
