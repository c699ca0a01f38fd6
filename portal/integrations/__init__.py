"""The Integrations page and the OpenLineage export wizard (spec, Parts 1-4).

The blueprint and the helpers every route shares live here; the routes are in the modules imported
at the bottom (the wizard and card in ``views``, the Terraform download in ``terraform_views``), so
that they can all import this package without importing each other.
"""

from __future__ import annotations

from flask import Blueprint, abort, redirect, url_for
from flask_login import current_user

from lineage_core.infra.models import Connector
from lineage_core.setup import connectors
from portal.database import get_db

bp = Blueprint("integrations", __name__, url_prefix="/integrations")


def org_id() -> int:
    """The signed-in admin's organization."""
    return int(current_user.organization_id)


def connector_or_404(connector_id: int) -> Connector:
    """The admin's own connector. Another organization's is indistinguishable from one that does not exist."""
    connector = connectors.get_for_org(get_db(), org_id(), connector_id)
    if connector is None:
        abort(404)
    return connector


def configured_connector(connector_id: int) -> Connector:
    """The admin's connector, when its settings are complete; otherwise the admin goes back to the form.

    For every page that needs the destination (downloads, deploy, Save, Read the export): a draft whose
    settings are incomplete is redirected to the setup form rather than shown half a page.
    """
    connector = connector_or_404(connector_id)
    if not connector.settings_complete:
        abort(redirect(url_for("integrations.setup", connector_id=connector.id)))
    return connector


# Routes, registered on ``bp`` as they are imported (after ``bp`` and the helpers exist).
from portal.integrations import card_views, terraform_views, views  # noqa: E402, F401
