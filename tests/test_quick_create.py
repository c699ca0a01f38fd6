"""The CloudFormation quick-create link beside "Download YAML File", and its setting CFN_TEMPLATE_BASE_URL."""

from __future__ import annotations

import html as html_lib
import re
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.config import ConfigError, Settings
from lineage_core.infra.models import ConnectorStatus, Organization, User
from portal import create_app
from tests.factories import make_connector
from tests.web import login

BASE = "https://olx-prod-templates-111122223333-eu-west-1.s3.eu-west-1.amazonaws.com/templates/"
ENV = {"SECRET_KEY": "s" * 32, "VENDOR_AWS_ACCOUNT_ID": "111122223333"}


def test_the_setting_is_an_optional_https_folder() -> None:
    assert Settings.from_env(ENV).cfn_template_base_url is None
    assert Settings.from_env({**ENV, "CFN_TEMPLATE_BASE_URL": BASE}).cfn_template_base_url == BASE
    assert Settings.from_env({**ENV, "CFN_TEMPLATE_BASE_URL": BASE[:-1]}).cfn_template_base_url == BASE


@pytest.mark.parametrize(
    "value",
    [
        "http://example.com/templates/",
        "https://",
        "https://x.example/t/?a=1",
        "https://u:p@x.example/t/",
        "t/",
    ],
)
def test_a_bad_template_url_stops_start_up_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="CFN_TEMPLATE_BASE_URL must be an https:// URL"):
        Settings.from_env({**ENV, "CFN_TEMPLATE_BASE_URL": value})


def _deploy_page(settings: Settings, admin: User, connector_id: int) -> str:
    app: Flask = create_app(test_config={"TESTING": True}, settings=settings)
    client: FlaskClient = app.test_client()
    login(client, admin.email)
    return str(client.get(f"/integrations/openlineage/{connector_id}/deploy").get_data(as_text=True))


def test_the_link_opens_quick_create_with_the_template_and_this_connections_values(
    settings: Settings, db: Session, org: Organization, admin: User
) -> None:
    connector = make_connector(
        db,
        org,
        status=ConnectorStatus.DRAFT,
        bucket="acme-lineage",
        prefix="foundational/openlineage",
        account_id="210987654321",
        role_name="FoundationalOpenLineageExport",
    )
    page = _deploy_page(replace(settings, cfn_template_base_url=BASE), admin, connector.id)
    match = re.search(r'<a class="button quick-create" id="quick-create" href="([^"]+)"', page)
    assert match, "no quick-create link"
    assert page.index('id="download-yaml"') < page.index('id="quick-create"')  # beside Download YAML File
    url = html_lib.unescape(match.group(1))
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == (
        "https",
        "console.aws.amazon.com",
        "/cloudformation/home",
    )
    assert parse_qs(parts.query) == {"region": ["us-east-1"]}
    route, _, query = parts.fragment.partition("?")
    assert route == "/stacks/create/review"
    params = {name: values[0] for name, values in parse_qs(query).items()}
    assert params == {
        "templateURL": BASE + "openlineage-export-role.yaml",
        "stackName": "FoundationalOpenLineageExport",
        "param_VendorAccountId": settings.vendor_account_id,
        "param_ExternalId": connector.external_id,
        "param_CustomerAccountId": "210987654321",
        "param_RoleName": "FoundationalOpenLineageExport",
        "param_RolePath": "/",
        "param_BucketName": "acme-lineage",
        "param_Prefix": "foundational/openlineage",
    }
    assert settings.secret_key not in url


def test_no_link_without_a_template_url(
    settings: Settings, db: Session, org: Organization, admin: User
) -> None:
    connector = make_connector(db, org)
    page = _deploy_page(replace(settings, cfn_template_base_url=None, local_mode=True), admin, connector.id)
    assert 'id="download-yaml"' in page and "quick-create" not in page
