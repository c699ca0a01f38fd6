"""The Integrations page, the wizard's steps and the connector card's actions (spec, Parts 1-4)."""

from __future__ import annotations

import json

from flask import Response, abort, current_app, flash, redirect, render_template, session, url_for
from werkzeug.wrappers.response import Response as BaseResponse

from lineage_core.export.reader_guide import reader_guide
from lineage_core.infra.models import Connector, ConnectorStatus
from lineage_core.ops.audit import Action
from lineage_core.setup import cloudformation, connectors, quick_create, stack_update
from lineage_core.setup.connectors import ConnectorSettings
from lineage_core.setup.destination import export_key, partition_for_region, s3_url
from lineage_core.setup.reader_policy import reader_policy
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.write_check import WriteCheckError
from portal.audit import audit, current_actor
from portal.database import get_db, settings
from portal.integrations import (
    bp,
    configured_connector,
    connector_or_404,
    lifecycle,
    local_aws,
    org_id,
    terraform_views,
)
from portal.integrations.card import CardView, card_view
from portal.integrations.forms import ConfirmForm, ConnectionForm
from portal.security import org_admin_required

SAVE_FAILED_KEY = "save_failed"  # the session marks the connection whose Save just failed


@bp.get("/")
@org_admin_required
def index() -> str:
    # The OpenLineage card: each account with the time and status of its last export (spec). A draft
    # is a setup not finished, not an account, unless it exported before (an edit waiting for Save).
    accounts, drafts = [], 0
    for connector, view in _card_items():
        if connector.status is ConnectorStatus.DRAFT and view.last_status is None:
            drafts += 1
        else:
            accounts.append((connector, view))
    return render_template("integrations/index.html", accounts=accounts, drafts=drafts)


def _card_items() -> list[tuple[Connector, CardView]]:
    db = get_db()
    return [
        (c, card_view(c, connectors.card_status(db, c.id))) for c in connectors.list_for_org(db, org_id())
    ]


@bp.get("/openlineage")
@org_admin_required
def accounts() -> str:
    return render_template(
        "integrations/accounts.html", items=_card_items(), form=ConfirmForm(), export_key=export_key
    )


@bp.route("/openlineage/new", methods=["GET", "POST"])
@org_admin_required
def start() -> str | BaseResponse:
    form = ConfirmForm()
    if form.validate_on_submit():
        db = get_db()
        connector = lifecycle.start_draft(db, org_id(), current_actor())
        db.commit()
        return redirect(url_for(".setup", connector_id=connector.id))
    return render_template("integrations/start.html", form=form)


@bp.route("/openlineage/<int:connector_id>/setup", methods=["GET", "POST"])
@org_admin_required
def setup(connector_id: int) -> tuple[str, int] | BaseResponse:
    connector = connector_or_404(connector_id)
    form = ConnectionForm(obj=connector if connector.settings_complete else None)
    form.destination_in_use = lambda bucket, prefix: _destination_in_use(connector, bucket, prefix)
    if form.validate_on_submit():
        values = ConnectorSettings(
            bucket=form.bucket.data,
            prefix=form.prefix.data,
            account_id=form.account_id.data,
            role_name=form.role_name.data,
            role_path=form.role_path.data,
            interval_days=form.interval_days.data,
            kms_key_arn=form.kms_key_arn.data,
            permissions_boundary_arn=form.permissions_boundary_arn.data,
        )
        # The form checked the destination already (destination_in_use), so this raises nothing.
        change = lifecycle.change_settings(get_db(), connector, values, current_actor())
        get_db().commit()
        was_active, role_changed = change.was_active, change.role_changed
        if was_active and not role_changed:
            flash("Saved. The new export interval applies from the next export.", "success")
            return redirect(url_for(".accounts"))
        if was_active:
            flash(
                "These changes affect the role. Download the template again, update the stack, "
                "then click Save: exports resume once the write check passes.",
                "warning",
            )
        return redirect(url_for(".deploy", connector_id=connector.id))
    status = 422 if form.is_submitted() else 200
    page = render_template(
        "integrations/setup.html", form=form, connector=connector, editing=_editing(connector)
    )
    return page, status


def _editing(connector: Connector) -> bool:
    """An edit of a connection saved before (active, paused, or it has exported), not a new setup."""
    return (
        connector.status is not ConnectorStatus.DRAFT
        or connectors.last_run(get_db(), connector.id) is not None
    )


def _destination_in_use(connector: Connector, bucket: str, prefix: str) -> str | None:
    return lifecycle.taken_location(get_db(), connector, bucket, prefix)


@bp.get("/openlineage/<int:connector_id>/deploy")
@org_admin_required
def deploy(connector_id: int) -> tuple[str, int]:
    connector = configured_connector(connector_id)
    # After a failed Save (POST, then redirect here): show its error once, at the Save section.
    failed = session.pop(SAVE_FAILED_KEY, None) == connector.id
    return _deploy_page(connector, error=connector.last_check_error if failed else None)


def _deploy_page(connector: Connector, error: str | None = None, status: int = 200) -> tuple[str, int]:
    return (
        render_template(
            "integrations/deploy.html",
            connector=connector,
            form=ConfirmForm(),
            error=error,
            local_mode=settings().local_mode,
            editing=_editing(connector),
            quick_create_url=quick_create.url_for_connector(settings(), connector),
            terraform_snippet=terraform_views.snippet_for(connector),
            # The values to check on CloudFormation's Parameters page when updating a stack, and the CLI
            # command with each one: the console keeps the stack's current values (stack_update).
            stack_update=stack_update.stack_update(
                RoleSpec.for_connector(connector, settings().vendor_account_id),
                cloudformation.download_name(connector),
            ),
            export_url=s3_url(connector.bucket or "", connector.prefix, "openlineage-events.jsonl"),
        ),
        status,
    )


@bp.get("/openlineage/<int:connector_id>/template.yaml")
@org_admin_required
def download_template(connector_id: int) -> BaseResponse:
    connector = configured_connector(connector_id)
    try:
        body = cloudformation.render_template(RoleSpec.for_connector(connector, settings().vendor_account_id))
    except cloudformation.TemplateValueError as error:
        # Only values stored before a rule tightened can get here: send the admin to fix them.
        flash(f"The template cannot be made from these settings: {error} Correct them.", "error")
        return redirect(url_for(".setup", connector_id=connector.id))
    return Response(
        body,
        mimetype="application/x-yaml",
        headers={"Content-Disposition": f'attachment; filename="{cloudformation.download_name(connector)}"'},
    )


@bp.post("/openlineage/<int:connector_id>/save")
@org_admin_required
def save(connector_id: int) -> str | BaseResponse | tuple[str, int]:
    connector = configured_connector(connector_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    try:
        result = lifecycle.save(get_db(), settings(), connector, current_actor())
    except WriteCheckError:
        # The draft and its External ID stay as they are: the admin fixes a field and saves again.
        current_app.logger.info("write check failed for connector %s", connector.id)
        # Post/Redirect/Get: the address stays the connection's page, and a reload does not post again.
        session[SAVE_FAILED_KEY] = connector.id
        return redirect(url_for(".deploy", connector_id=connector.id, _anchor="connect"))
    flash(result.message, "success")
    return redirect(url_for(".accounts"))


@bp.post("/openlineage/<int:connector_id>/delete")
@org_admin_required
def delete(connector_id: int) -> BaseResponse:
    connector = connector_or_404(connector_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    lifecycle.delete(get_db(), connector, current_actor())
    flash(lifecycle.DELETED_MESSAGE, "success")
    return redirect(url_for(".accounts"))


@bp.post("/openlineage/<int:connector_id>/deploy-local")
@org_admin_required
def deploy_local(connector_id: int) -> BaseResponse:
    """Local demo only: deploy the downloaded template to the local AWS endpoint."""
    if not settings().local_mode:
        abort(404)
    connector = configured_connector(connector_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    spec = RoleSpec.for_connector(connector, settings().vendor_account_id)
    succeeded, message = local_aws.deploy_stack(settings(), spec)
    audit(
        Action.CONNECTION_DEPLOYED_LOCALLY,
        target_type="connector",
        target_id=connector.id,
        details={"succeeded": succeeded},
    )
    get_db().commit()
    flash(message, "success" if succeeded else "error")
    return redirect(url_for(".deploy", connector_id=connector.id))


def _post_or_400() -> None:
    if not ConfirmForm().validate_on_submit():
        abort(400)


@bp.post("/openlineage/<int:connector_id>/export-now")
@org_admin_required
def export_now(connector_id: int) -> BaseResponse:
    connector = connector_or_404(connector_id)
    _post_or_400()
    try:
        lifecycle.export_now(get_db(), settings(), connector, current_actor())
    except lifecycle.ExportNowError as refused:
        flash(str(refused), "error" if refused.reason is lifecycle.ExportRefused.NOT_ACTIVE else "warning")
    else:
        flash("Export started.", "success")
    return redirect(url_for(".accounts"))


@bp.post("/openlineage/<int:connector_id>/pause")
@org_admin_required
def pause(connector_id: int) -> BaseResponse:
    return _set_paused(connector_id, True, "Exports paused. The last export file stays in the bucket.")


@bp.post("/openlineage/<int:connector_id>/resume")
@org_admin_required
def resume(connector_id: int) -> BaseResponse:
    return _set_paused(connector_id, False, "Exports resumed.")


def _set_paused(connector_id: int, paused: bool, message: str) -> BaseResponse:
    connector = connector_or_404(connector_id)
    _post_or_400()
    if lifecycle.set_paused(get_db(), connector, paused, current_actor()):
        flash(message, "success")
    return redirect(url_for(".accounts"))


@bp.get("/openlineage/<int:connector_id>/history")
@org_admin_required
def history(connector_id: int) -> str:
    connector = connector_or_404(connector_id)
    return render_template(
        "integrations/history.html", connector=connector, runs=connectors.history(get_db(), connector.id)
    )


@bp.get("/openlineage/<int:connector_id>/read")
@org_admin_required
def read_export(connector_id: int) -> str | BaseResponse:
    """Part 4 of the spec: what a downstream tool needs to read the export."""
    connector = configured_connector(connector_id)
    partition = partition_for_region(connector.bucket_region or settings().aws_region)
    policy = reader_policy(connector.bucket or "", connector.prefix, partition)
    guide = reader_guide(connector.bucket or "", connector.prefix)
    return render_template(
        "integrations/read.html",
        connector=connector,
        policy_json=json.dumps(policy, indent=2),
        export_url=s3_url(connector.bucket or "", connector.prefix, "openlineage-events.jsonl"),
        guide=guide,
        notification_json=json.dumps(guide.notification_configuration, indent=2),
        eventbridge_json=json.dumps(guide.eventbridge_pattern, indent=2),
    )
