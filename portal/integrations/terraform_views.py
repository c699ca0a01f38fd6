"""The wizard's Terraform download: the customer-role module zipped with this connector's root configuration.

``views.py`` owns the ``integrations`` blueprint and calls :func:`register` on it; this module cannot
import the blueprint itself (``views`` imports this module, so that would be circular). For the same
reason the view imports ``views`` helpers when it runs, by which time both modules are loaded.
"""

from __future__ import annotations

from flask import Blueprint, Response, redirect, url_for
from werkzeug.wrappers.response import Response as BaseResponse

from lineage_core.infra.models import Connector
from lineage_core.setup import terraform_bundle
from lineage_core.setup.role_spec import RoleSpec
from portal.database import settings
from portal.security import org_admin_required


def _role_spec(connector: Connector) -> RoleSpec:
    return RoleSpec.for_connector(connector, settings().vendor_account_id)


def snippet_for(connector: Connector) -> str:
    """The ``module`` block shown on the deploy page, for a connector whose settings are complete."""
    return terraform_bundle.root_snippet(_role_spec(connector))


@org_admin_required
def download_terraform(connector_id: int) -> BaseResponse:
    """``GET /integrations/openlineage/<id>/terraform.zip``: the module and a filled-in ``main.tf``.

    Like the YAML download: another organization's connector is a 404, and a draft whose settings are
    incomplete sends the admin back to the setup form.
    """
    from portal.integrations.views import _connector_or_404

    connector = _connector_or_404(connector_id)
    if not connector.settings_complete:
        return redirect(url_for(".setup", connector_id=connector.id))
    body = terraform_bundle.build_zip(_role_spec(connector))
    return Response(
        body,
        mimetype="application/zip",
        headers={
            "Content-Disposition": f'attachment; filename="{terraform_bundle.download_name(connector)}"',
            # The zip carries the connector's External ID: keep it out of shared caches.
            "Cache-Control": "no-store",
        },
    )


def register(bp: Blueprint) -> None:
    """Add the Terraform routes to the ``integrations`` blueprint (before it is registered on an app)."""
    bp.add_url_rule(
        "/openlineage/<int:connector_id>/terraform.zip",
        endpoint="download_terraform",
        view_func=download_terraform,
        methods=["GET"],
    )
