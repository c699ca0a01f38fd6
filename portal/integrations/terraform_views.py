"""The wizard's Terraform download: the customer-role module, zipped with the connector's root module."""

from __future__ import annotations

from flask import Response
from werkzeug.wrappers.response import Response as BaseResponse

from lineage_core.infra.models import Connector
from lineage_core.setup import terraform_bundle
from lineage_core.setup.role_spec import RoleSpec
from portal.database import settings
from portal.integrations import bp, configured_connector
from portal.security import org_admin_required


def _role_spec(connector: Connector) -> RoleSpec:
    return RoleSpec.for_connector(connector, settings().vendor_account_id)


def snippet_for(connector: Connector) -> str:
    """The ``module`` block shown on the deploy page, for a connector whose settings are complete."""
    return terraform_bundle.root_snippet(_role_spec(connector))


@bp.get("/openlineage/<int:connector_id>/terraform.zip")
@org_admin_required
def download_terraform(connector_id: int) -> BaseResponse:
    """``GET /integrations/openlineage/<id>/terraform.zip``: the module and a filled-in ``main.tf``.

    Like the YAML download: another organization's connector is a 404, and a draft whose settings are
    incomplete sends the admin back to the setup form.
    """
    connector = configured_connector(connector_id)
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
