"""The local demo shows the spec's Troubleshooting: Save is refused as real STS would refuse it.

The local AWS endpoint lets anyone assume any role; in local mode the write check first asks the local
IAM whether the role exists in the entered account and trusts us with this External ID. Production
settings (LOCAL_MODE off) never ask: the other Save tests run with local mode off and moto's lax STS.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.demo.local_stack import LocalDeployError, deploy_template, stack_name_for
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ConnectorStatus, User
from lineage_core.setup.cloudformation import render_template
from lineage_core.setup.role_spec import RoleSpec
from portal import create_app
from tests.factories import create_bucket, create_role_through_iam
from tests.services import VENDOR_ACCOUNT_ID
from tests.web import login, post_form, save, save_failing, start_and_fill

ROLE = "arn:aws:iam::{account}:role/FoundationalOpenLineageExport"
ADVICE = "Check that the stack was created in AWS account {account} from the downloaded template"


@pytest.fixture
def local_client(settings: Settings, admin: User) -> FlaskClient:
    app: Flask = create_app(test_config={"TESTING": True}, settings=replace(settings, local_mode=True))
    client = app.test_client()
    login(client, admin.email)
    return client


def _spec(connector: Connector) -> RoleSpec:
    return RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)


def test_save_before_the_stack_is_deployed_cannot_assume_the_role(
    aws: str, local_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(local_client, db)
    html = save_failing(local_client, connector.id).replace("&#39;", "'")
    assert f"Could not assume the trust role {ROLE.format(account='123456789012')}: " in html
    assert "there is no role FoundationalOpenLineageExport in AWS account 123456789012. Check that" in html
    assert ADVICE.format(account="123456789012") in html

    # Part 2 (the local stand-in), then Save again: connected.
    deploy = f"/integrations/openlineage/{connector.id}/deploy"
    post_form(local_client, deploy, f"/integrations/openlineage/{connector.id}/deploy-local", {})
    assert save(local_client, connector.id).status_code == 302
    db.expire_all()
    assert db.get(Connector, connector.id).status is ConnectorStatus.ACTIVE  # type: ignore[union-attr]


def test_a_wrong_account_id_cannot_assume_the_role_and_its_stack_is_refused(
    aws: str, local_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(local_client, db, account_id="999999999999")
    deploy = f"/integrations/openlineage/{connector.id}/deploy"
    response = post_form(local_client, deploy, f"/integrations/openlineage/{connector.id}/deploy-local", {})
    page = local_client.get(response.headers["Location"]).get_data(as_text=True)
    assert "was not created: the local AWS endpoint is account 123456789012." in page
    assert "This template was generated for another AWS account." in page

    # Even with the role there (say, deployed by hand), it is not in account 999999999999.
    deploy_template(
        settings_for(local_client),
        render_template(replace(_spec(connector), customer_account_id="123456789012")),
        stack_name_for("by-hand"),
    )
    html = save_failing(local_client, connector.id)
    assert f"Could not assume the trust role {ROLE.format(account='999999999999')}: " in html
    assert "there is no role FoundationalOpenLineageExport in AWS account 999999999999" in html


def test_a_role_trusting_another_external_id_cannot_be_assumed(
    aws: str, local_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(local_client, db)
    create_role_through_iam(aws, replace(_spec(connector), external_id="olx-another-connections-id"))
    html = save_failing(local_client, connector.id).replace("&#39;", "'")
    assert "the role's trust policy does not let Foundational's account 123456789012 assume it" in html


def settings_for(client: FlaskClient) -> Settings:
    settings: Settings = client.application.config["SETTINGS"]
    return settings


def test_local_deploy_of_an_edited_stack_says_updated(
    settings: Settings, aws: str, db: Session, admin: User
) -> None:
    app: Flask = create_app(test_config={"TESTING": True}, settings=replace(settings, local_mode=True))
    client = app.test_client()
    login(client, admin.email)
    connector = start_and_fill(client, db)
    deploy_url = f"/integrations/openlineage/{connector.id}/deploy"
    local = f"/integrations/openlineage/{connector.id}/deploy-local"
    first = post_form(client, deploy_url, local, {})
    assert "it created arn:aws:iam::123456789012:role/FoundationalOpenLineageExport" in client.get(
        first.headers["Location"]
    ).get_data(as_text=True)
    again = post_form(client, deploy_url, local, {})
    html = client.get(again.headers["Location"]).get_data(as_text=True)
    assert "updated on the local AWS endpoint" in html and "it created" not in html


def test_deploy_template_locally_keeps_the_template_account_rule(settings: Settings, aws: str) -> None:
    spec = RoleSpec(
        vendor_account_id=VENDOR_ACCOUNT_ID,
        external_id="olx-" + "a" * 48,
        role_name="WrongAccountRole",
        role_path="/",
        bucket="acme-lineage",
        prefix="",
        customer_account_id="999999999999",  # the local endpoint is 123456789012
    )
    with pytest.raises(LocalDeployError, match="This template was generated for another AWS account"):
        deploy_template(settings, render_template(spec), stack_name_for(spec.role_name))
