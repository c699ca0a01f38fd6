"""The wizard's Terraform download (``GET .../terraform.zip``) and the Terraform part of the deploy page."""

from __future__ import annotations

import html
import io
import zipfile

import pytest
from flask import Flask, render_template
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.models import User
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.terraform_bundle import bundle_folder, download_name, root_configuration, root_snippet
from tests.factories import build_connector, make_org, make_user
from tests.services import VENDOR_ACCOUNT_ID
from tests.web import CUSTOMER_ACCOUNT, login, post_form, start_and_fill


@pytest.fixture(autouse=True)
def _routes_are_wired(app: Flask) -> None:
    assert "integrations.download_terraform" in app.view_functions, (
        "the Terraform download is not wired: portal/integrations/views.py must call "
        "terraform_views.register(bp) and pass terraform_snippet to deploy.html"
    )


def _zip_url(connector_id: int) -> str:
    return f"/integrations/openlineage/{connector_id}/terraform.zip"


def test_download_is_the_module_with_this_connectors_root(admin_client: FlaskClient, db: Session) -> None:
    connector = start_and_fill(admin_client, db, kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/abc")
    response = admin_client.get(_zip_url(connector.id))

    assert response.status_code == 200
    assert response.mimetype == "application/zip"
    assert response.headers["Content-Disposition"] == f'attachment; filename="{download_name(connector)}"'
    assert response.headers["Cache-Control"] == "no-store"
    spec = RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)
    with zipfile.ZipFile(io.BytesIO(response.get_data())) as archive:
        main_tf = archive.read(f"{bundle_folder(spec)}/main.tf").decode()
        names = archive.namelist()
    assert main_tf == root_configuration(spec)
    for value in (connector.external_id, VENDOR_ACCOUNT_ID, CUSTOMER_ACCOUNT, connector.kms_key_arn):
        assert f'"{value}"' in main_tf
    assert f"{bundle_folder(spec)}/modules/openlineage-export-role/modules/policies/main.tf" in names


def test_incomplete_draft_goes_back_to_setup(admin_client: FlaskClient) -> None:
    started = post_form(admin_client, "/integrations/openlineage/new", None, {})
    setup_url = started.headers["Location"]
    connector_id = int(setup_url.rstrip("/").split("/")[-2])

    response = admin_client.get(_zip_url(connector_id))
    assert response.status_code == 302
    assert response.headers["Location"].endswith(f"/integrations/openlineage/{connector_id}/setup")


def test_only_the_connectors_own_org_admins_can_download(
    app: Flask, admin_client: FlaskClient, db: Session, operator: User
) -> None:
    connector = start_and_fill(admin_client, db)

    anonymous = app.test_client()
    response = anonymous.get(_zip_url(connector.id))
    assert response.status_code == 302 and "/login" in response.headers["Location"]

    staff = app.test_client()
    login(staff, operator.email)
    assert staff.get(_zip_url(connector.id)).status_code == 403

    make_user(db, make_org(db, "globex", "Globex"), "admin@globex.test")
    intruder = app.test_client()
    login(intruder, "admin@globex.test")
    assert intruder.get(_zip_url(connector.id)).status_code == 404
    assert intruder.get(_zip_url(connector.id + 1000)).status_code == 404


def test_deploy_page_offers_the_module_and_the_snippet(admin_client: FlaskClient, db: Session) -> None:
    connector = start_and_fill(admin_client, db)
    page = admin_client.get(f"/integrations/openlineage/{connector.id}/deploy").get_data(as_text=True)

    assert "Download Terraform module" in page
    assert f'href="{_zip_url(connector.id)}"' in page
    snippet = root_snippet(RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID))
    assert snippet in html.unescape(page)


def test_partial_escapes_the_snippet(app: Flask) -> None:
    connector = build_connector(id=7, account_id=CUSTOMER_ACCOUNT)
    with app.test_request_context():
        rendered = render_template(
            "integrations/_terraform.html", connector=connector, terraform_snippet='<script>"x"</script>'
        )
    assert "<script>" not in rendered
    assert "&lt;script&gt;" in rendered
    assert 'href="/integrations/openlineage/7/terraform.zip"' in rendered
