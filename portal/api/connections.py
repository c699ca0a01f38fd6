"""``/api/v1/connections``: everything the wizard and the connector card do, from code.

Every call takes an organization API key (``Authorization: Bearer olk_...``): reading needs the
``connections:read`` scope, changing anything ``connections:write`` (which implies read). A
connection of another organization answers 404, exactly as one that does not exist. Each step is the
portal's own (:mod:`portal.integrations.lifecycle`): the same parsers, the same write check, the same
messages, the same audit rows (their actor is the key's prefix). The contract, with every status and
body, is the OpenAPI document (:mod:`portal.api.openapi`, served at ``/api/v1/openapi.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, request, url_for
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import Scope
from lineage_core.infra.models import Connector, ConnectorStatus
from lineage_core.ops.audit import Actor
from lineage_core.setup import cloudformation, connectors, rotations, terraform_bundle
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.write_check import WriteCheckError
from portal.api.auth import api_key_required, current_api_actor, current_caller
from portal.api.connection_json import SETTING_NAMES, camel, connection_json, run_json
from portal.api.responses import ApiError, Problem, json_response
from portal.api.write_check_fields import write_check_problems
from portal.database import get_db, settings
from portal.extensions import csrf
from portal.integrations import lifecycle

bp = Blueprint("connections_api", __name__, url_prefix="/api/v1/connections")
# Bearer keys, no session cookie: a cross-site form cannot act for an API client, so no CSRF token.
csrf.exempt(bp)

READ, WRITE = Scope.CONNECTIONS_READ, Scope.CONNECTIONS_WRITE
RUNS_LIMIT_MAX = 100
_EXTERNAL_ID = "externalId"


# Reading requests --------------------------------------------------------------------------------------


def _connection(connector_id: int) -> Connector:
    """The caller's own connection; another organization's is indistinguishable from none."""
    connector = connectors.get_for_org(get_db(), current_caller().organization_id, connector_id)
    if connector is None:
        raise ApiError.one(404, "not_found", "id", f"No connection {connector_id} in this organization.")
    return connector


def _configured(connector: Connector) -> Connector:
    if not connector.settings_complete:
        raise ApiError.one(
            409,
            "settings_incomplete",
            "settings",
            "The connection's settings are not complete: set at least bucket, accountId and roleName "
            f"first (PATCH /api/v1/connections/{connector.id}).",
        )
    return connector


def _json_object() -> dict[str, Any]:
    """The request's JSON object body; an empty body is an empty object."""
    if not request.get_data(cache=True):
        return {}
    if not request.is_json:
        raise ApiError.one(
            415,
            "unsupported_media_type",
            "Content-Type",
            f"Content-Type must be application/json; got {request.mimetype or 'none'}.",
        )
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError.one(400, "malformed_body", "body", "The body must be a JSON object of settings.")
    return body


def _settings_input(body: dict[str, Any]) -> dict[str, str]:
    """The body's settings by the wizard's field names, as text (the parsers take what a form sends)."""
    if _EXTERNAL_ID in body:
        raise ApiError.one(400, "external_id_read_only", _EXTERNAL_ID, lifecycle.EXTERNAL_ID_IS_OURS)
    known = ", ".join(SETTING_NAMES)
    problems = [
        Problem(name, "unknown_field", f"{name} is not a setting; the settings are {known}.")
        for name in body
        if name not in SETTING_NAMES
    ]
    values: dict[str, str] = {}
    for name, value in body.items():
        if name not in SETTING_NAMES:
            continue
        if value is None:
            values[SETTING_NAMES[name]] = ""
        elif isinstance(value, str) or (name == "intervalDays" and type(value) is int):
            values[SETTING_NAMES[name]] = str(value)
        else:
            problems.append(Problem(name, "invalid_type", f"{name} must be a string."))
    if problems:
        raise ApiError(400, problems[0].code, problems)
    return values


def _settings_error(error: lifecycle.SettingsError) -> ApiError:
    problems = [Problem(camel(field), "invalid_setting", message) for field, message in error.errors.items()]
    return ApiError(400, "invalid_settings", problems)


def _parsed(values: dict[str, str]) -> Any:
    try:
        return lifecycle.parse_settings(values)
    except lifecycle.SettingsError as error:
        raise _settings_error(error) from None


# Routes ------------------------------------------------------------------------------------------------


@bp.get("")
@api_key_required(READ)
def list_connections() -> Response:
    found = connectors.list_for_org(get_db(), current_caller().organization_id)
    return json_response({"connections": [connection_json(connector) for connector in found]})


@bp.post("")
@api_key_required(WRITE)
def create_connection() -> Response:
    """A draft with its External ID ("Start Setup"), and its settings at once when the body has them."""
    given = _settings_input(_json_object())
    values = _parsed(given) if given else None  # nothing is written when a setting is wrong
    db = get_db()
    actor = current_api_actor()
    connector = lifecycle.start_draft(db, current_caller().organization_id, actor)
    if values is not None:
        try:
            lifecycle.change_settings(db, connector, values, actor)
        except lifecycle.SettingsError as error:
            db.rollback()
            raise _settings_error(error) from None
    db.commit()
    location = url_for(".get_connection", connector_id=connector.id, _external=True)
    return json_response(connection_json(connector), 201, Location=location)


@bp.get("/<int:connector_id>")
@api_key_required(READ)
def get_connection(connector_id: int) -> Response:
    return json_response(connection_json(_connection(connector_id)))


@bp.patch("/<int:connector_id>")
@api_key_required(WRITE)
def change_connection(connector_id: int) -> Response:
    """ "Set Up New Connection" → Next: the settings sent replace the stored ones; others stay."""
    connector = _connection(connector_id)
    given = _settings_input(_json_object())
    values = _parsed({**lifecycle.current_settings(connector), **given})
    db = get_db()
    try:
        change = lifecycle.change_settings(db, connector, values, current_api_actor())
    except lifecycle.SettingsError as error:
        db.rollback()
        raise _settings_error(error) from None
    db.commit()
    if change.was_active and not change.role_changed:
        message = "Saved. The new export interval applies from the next export."
    elif change.was_active:
        message = (
            "These changes affect the role. Download the template again, update the stack, then "
            "activate: exports resume once the write check passes."
        )
    else:
        message = "Saved. Deploy the CloudFormation template or the Terraform module, then activate."
    return json_response(
        {"connection": connection_json(connector), "roleChanged": change.role_changed, "message": message}
    )


@bp.delete("/<int:connector_id>")
@api_key_required(WRITE)
def delete_connection(connector_id: int) -> Response:
    lifecycle.delete(get_db(), _connection(connector_id), current_api_actor())
    return Response(status=204)


@bp.post("/<int:connector_id>/activate")
@api_key_required(WRITE)
def activate_connection(connector_id: int) -> Response:
    """The portal's "Save": the write check, then active, and the first export queued."""
    connector = _configured(_connection(connector_id))
    try:
        result = lifecycle.save(get_db(), settings(), connector, current_api_actor())
    except WriteCheckError as error:
        raise ApiError(422, "write_check_failed", write_check_problems(str(error), connector)) from None
    return json_response(
        {
            "connection": connection_json(connector),
            "outcome": result.outcome.value,
            "run": run_json(result.run) if result.run is not None else None,
            "message": result.message,
        }
    )


@bp.post("/<int:connector_id>/exports")
@api_key_required(WRITE)
def export_now(connector_id: int) -> Response:
    connector = _connection(connector_id)
    try:
        run = lifecycle.export_now(get_db(), settings(), connector, current_api_actor())
    except lifecycle.ExportNowError as refused:
        raise ApiError.one(409, refused.reason.value, "status", str(refused)) from None
    return json_response({"run": run_json(run), "message": "Export started."}, 202)


@bp.post("/<int:connector_id>/pause")
@api_key_required(WRITE)
def pause_connection(connector_id: int) -> Response:
    return _set_paused(connector_id, True, "Exports paused. The last export file stays in the bucket.")


@bp.post("/<int:connector_id>/resume")
@api_key_required(WRITE)
def resume_connection(connector_id: int) -> Response:
    return _set_paused(connector_id, False, "Exports resumed.")


def _set_paused(connector_id: int, paused: bool, message: str) -> Response:
    connector = _connection(connector_id)
    changed = lifecycle.set_paused(get_db(), connector, paused, current_api_actor())
    if not changed:
        wanted, verb = (ConnectorStatus.ACTIVE, "paused") if paused else (ConnectorStatus.PAUSED, "resumed")
        message = f"Nothing changed: only a connection that is {wanted.value} can be {verb}."
    return json_response({"connection": connection_json(connector), "changed": changed, "message": message})


@bp.get("/<int:connector_id>/runs")
@api_key_required(READ)
def list_runs(connector_id: int) -> Response:
    """The connection's export runs, newest first (as its History page)."""
    connector = _connection(connector_id)
    raw = request.args.get("limit", str(RUNS_LIMIT_MAX))
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= RUNS_LIMIT_MAX):
        raise ApiError.one(
            400, "invalid_parameter", "limit", f"limit is a whole number from 1 to {RUNS_LIMIT_MAX}."
        )
    runs = connectors.history(get_db(), connector.id, int(raw))
    return json_response({"runs": [run_json(run) for run in runs]})


@bp.post("/<int:connector_id>/rotation")
@api_key_required(WRITE)
def start_rotation(connector_id: int) -> Response:
    """The card's "Rotate External ID": the downloads trust a new ID too until activate verifies it."""
    return _rotate(connector_id, lifecycle.start_rotation)


@bp.delete("/<int:connector_id>/rotation")
@api_key_required(WRITE)
def cancel_rotation(connector_id: int) -> Response:
    """The card's "Cancel rotation": the new ID is forgotten; the current one stays in use."""
    return _rotate(connector_id, lifecycle.cancel_rotation)


def _rotate(connector_id: int, step: Callable[[Session, Connector, Actor], None]) -> Response:
    connector = _connection(connector_id)
    try:
        step(get_db(), connector, current_api_actor())
    except rotations.RotationError as error:
        raise ApiError.one(409, "rotation_refused", "rotation", str(error)) from None
    return json_response(
        {"connection": connection_json(connector), "rotation": rotations.rotation_view(connector)}
    )


def _role_spec(connector: Connector) -> RoleSpec:
    return RoleSpec.for_connector(_configured(connector), settings().vendor_account_id)


@bp.get("/<int:connector_id>/cloudformation")
@api_key_required(READ)
def download_cloudformation(connector_id: int) -> Response:
    """The portal's "Download YAML File": the role template with this connection's values."""
    connector = _connection(connector_id)
    try:
        body = cloudformation.render_template(_role_spec(connector))
    except cloudformation.TemplateValueError as error:
        # Only values stored before a rule tightened can get here.
        raise ApiError.one(
            409,
            "template_unavailable",
            "settings",
            f"The template cannot be made from these settings: {error} Correct them.",
        ) from None
    return _download(body, "application/x-yaml", cloudformation.download_name(connector))


@bp.get("/<int:connector_id>/terraform")
@api_key_required(READ)
def download_terraform(connector_id: int) -> Response:
    """The portal's Terraform download: the customer-role module, zipped with a filled-in ``main.tf``."""
    connector = _connection(connector_id)
    body = terraform_bundle.build_zip(_role_spec(connector))
    return _download(body, "application/zip", terraform_bundle.download_name(connector))


def _download(body: str | bytes, mimetype: str, filename: str) -> Response:
    return Response(
        body,
        mimetype=mimetype,
        headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            # Both carry the connection's External ID: keep them out of shared caches.
            "Cache-Control": "no-store",
        },
    )
