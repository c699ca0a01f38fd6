"""External ID rotation end to end: the card's forms, the downloads, Save with the new ID, the exports.

Real PostgreSQL and the moto server over HTTP. moto's STS accepts any External ID, so which ID an
export presents is read from the AssumeRole requests themselves (:class:`RecordingClients`), and
whether the old ID "still works" is made observable the way the local demo does it: in local mode the
check asks the local IAM whether the role's trust policy still lists the old ID. The AccessDenied that
real STS answers is driven through botocore's Stubber (real error shapes).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import replace
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.export.old_id_check import check_old_external_id, old_id_works
from lineage_core.export.run import run_export
from lineage_core.infra.aws import LiveAwsClients
from lineage_core.infra.config import Settings
from lineage_core.infra.models import (
    AuditEvent,
    Connector,
    Organization,
    Role,
    RotationState,
    RunStatus,
    User,
)
from lineage_core.ops.audit import Action
from lineage_core.setup import cloudformation, quick_create, rotations
from lineage_core.setup.destination import Destination, role_arn
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.write_check import WriteCheckResult
from portal import create_app
from tests.factories import (
    BUCKET,
    PREFIX,
    create_role_through_iam,
    make_connector,
    make_org,
    make_run,
    make_user,
)
from tests.services import VENDOR_ACCOUNT_ID
from tests.web import csrf_token_from, login, post_form, save, save_failing

CARD = "/integrations/openlineage"
LOCAL_ACCOUNT = "123456789012"  # moto's account: where the local demo's roles live
LOCAL_ROLE_ARN = role_arn("aws", LOCAL_ACCOUNT, "/", "FoundationalOpenLineageExport")


def _url(connector: Connector, action: str) -> str:
    return f"/integrations/openlineage/{connector.id}/{action}"


def _press(client: FlaskClient, connector: Connector, action: str) -> Any:
    """A card button: GET the card for its CSRF token, POST the form."""
    return post_form(client, CARD, _url(connector, action), {})


def _reload(db: Session, connector: Connector) -> Connector:
    db.expire_all()
    found = db.get(Connector, connector.id)
    assert found is not None
    db.rollback()
    return found


def _card(client: FlaskClient) -> str:
    """The OpenLineage page's text as read: without the markup that only controls line breaks."""
    html = str(client.get(CARD).get_data(as_text=True)).replace("<wbr>", "").replace("&#39;", "'")
    return re.sub(r'<span class="nowrap">([^<]*)</span>', r"\1", html)


def _external_id_defaults(client: FlaskClient, connector: Connector) -> tuple[str, str]:
    """The (ExternalId, NewExternalId) defaults of the connector's template download."""
    parameters = yaml.safe_load(client.get(_url(connector, "template.yaml")).get_data(as_text=True))[
        "Parameters"
    ]
    return parameters["ExternalId"]["Default"], parameters["NewExternalId"]["Default"]


def _audited(db: Session, action: Action) -> list[AuditEvent]:
    db.expire_all()
    rows = list(db.scalars(select(AuditEvent).where(AuditEvent.action == action.value)))
    db.rollback()
    return rows


class RecordingClients(LiveAwsClients):
    """The live clients (moto over HTTP); every AssumeRole's ExternalId is noted, in order."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.external_ids: list[str | None] = []

    def sts(self) -> Any:
        client = super().sts()

        def note(params: dict[str, Any], **_: Any) -> None:
            self.external_ids.append(params.get("ExternalId"))

        client.meta.events.register("provide-client-params.sts.AssumeRole", note)
        return client


# -- the card's forms --------------------------------------------------------------------------------------


def test_rotate_on_the_card_then_every_download_trusts_both_ids(
    settings: Settings, admin_client: FlaskClient, db: Session, org: Organization, aws: str
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    response = _press(admin_client, connector, "rotate-external-id")
    assert response.status_code == 302 and response.headers["Location"].endswith(f"#connector-{connector.id}")
    connector = _reload(db, connector)
    new = connector.new_external_id
    assert connector.rotation_state is RotationState.PENDING and new

    card = _card(admin_client)
    assert "A new External ID is ready. Download the template again, update the stack" in card
    assert f'id="new-external-id-{connector.id}">{new}<' in card
    assert "Cancel rotation" in card and "Rotate External ID" not in card

    # CloudFormation: both IDs as parameter defaults; deployed, the role trusts the list of both.
    template = admin_client.get(_url(connector, "template.yaml")).get_data(as_text=True)
    parameters = yaml.safe_load(template)["Parameters"]
    assert (parameters["ExternalId"]["Default"], parameters["NewExternalId"]["Default"]) == (current, new)
    cfn = boto3.client("cloudformation", endpoint_url=aws, region_name="us-east-1")
    # The stack goes to moto's account, as the local demo deploys it.
    body = template.replace(f"Default: '{connector.account_id}'", f"Default: '{LOCAL_ACCOUNT}'")
    cfn.create_stack(StackName="rotation", TemplateBody=body, Capabilities=["CAPABILITY_NAMED_IAM"])
    role = boto3.client("iam", endpoint_url=aws).get_role(RoleName=connector.role_name)["Role"]
    statement = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert statement["Condition"] == {"StringEquals": {"sts:ExternalId": [current, new]}}

    # Terraform: the generated main.tf passes both.
    archive = zipfile.ZipFile(io.BytesIO(admin_client.get(_url(connector, "terraform.zip")).data))
    main_tf = next(archive.read(name).decode() for name in archive.namelist() if name.endswith("/main.tf"))
    assert f'external_id       = "{current}"' in main_tf and f'new_external_id   = "{new}"' in main_tf

    # The quick-create link carries both as parameters.
    linked = replace(settings, cfn_template_base_url="https://templates.example.com/openlineage/")
    link = quick_create.url_for_connector(linked, connector)
    assert link and f"param_ExternalId={current}" in link and f"param_NewExternalId={new}" in link

    entries = _audited(db, Action.ROTATION_STARTED)
    assert [(e.target_id, e.actor) for e in entries] == [(connector.id, "admin@acme.test")]
    assert current not in (entries[0].details or "") and new not in (entries[0].details or "")


def test_a_second_rotation_is_refused_on_the_card(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    _press(admin_client, connector, "rotate-external-id")
    new = _reload(db, connector).new_external_id
    # The card no longer offers the button; a POST anyway (another tab) is refused in words.
    response = _press(admin_client, connector, "rotate-external-id")
    assert response.status_code == 302
    assert "A new External ID is already waiting for Save." in _card(admin_client)
    assert _reload(db, connector).new_external_id == new
    assert len(_audited(db, Action.ROTATION_STARTED)) == 1


def test_cancel_before_save_returns_to_the_current_id(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    _press(admin_client, connector, "rotate-external-id")
    assert _press(admin_client, connector, "cancel-rotation").status_code == 302
    connector = _reload(db, connector)
    assert (connector.rotation_state, connector.external_id, connector.new_external_id) == (
        RotationState.NONE,
        current,
        None,
    )
    assert "Rotation cancelled. Foundational keeps using the current External ID" in _card(admin_client)
    assert _external_id_defaults(admin_client, connector) == (current, "")
    assert len(_audited(db, Action.ROTATION_CANCELLED)) == 1
    # Nothing left to cancel: said so.
    _press(admin_client, connector, "cancel-rotation")
    assert "There is no External ID rotation to cancel." in _card(admin_client)


@pytest.mark.parametrize("action", ["rotate-external-id", "cancel-rotation"])
def test_the_forms_need_their_csrf_token(
    action: str, admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    if action == "cancel-rotation":
        _press(admin_client, connector, "rotate-external-id")
    before = _reload(db, connector).rotation_state
    assert admin_client.post(_url(connector, action)).status_code == 400
    assert admin_client.post(_url(connector, action), data={"csrf_token": "forged"}).status_code == 400
    assert _reload(db, connector).rotation_state is before


def test_another_organization_can_neither_rotate_nor_cancel_nor_see_the_ids(
    app: Flask, admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    _press(admin_client, connector, "rotate-external-id")
    pending = _reload(db, connector)
    make_user(db, make_org(db, "globex"), "admin@globex.test")
    intruder = app.test_client()
    login(intruder, "admin@globex.test")
    token = csrf_token_from(intruder.get(CARD).get_data(as_text=True))
    for action in ("rotate-external-id", "cancel-rotation"):
        assert intruder.post(_url(connector, action), data={"csrf_token": token}).status_code == 404
    page = _card(intruder)
    assert pending.external_id not in page and (pending.new_external_id or "") not in page
    assert _reload(db, connector).new_external_id == pending.new_external_id


def test_only_org_admins_reach_the_forms(client: FlaskClient, db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    token = csrf_token_from(client.get("/login").get_data(as_text=True))
    anonymous = client.post(_url(connector, "rotate-external-id"), data={"csrf_token": token})
    assert anonymous.status_code in (302, 403) and "/login" in anonymous.headers.get("Location", "/login")
    make_user(db, None, "ops@vendor.test", role=Role.OPERATOR)
    login(client, "ops@vendor.test")
    token = csrf_token_from(client.get("/ops/").get_data(as_text=True))
    assert client.post(_url(connector, "rotate-external-id"), data={"csrf_token": token}).status_code == 403
    assert _reload(db, connector).rotation_state is RotationState.NONE


# -- Save checks the new ID (local demo: its IAM answers what real STS would) ------------------------------


@pytest.fixture
def local_settings(settings: Settings) -> Settings:
    return replace(settings, local_mode=True)


@pytest.fixture
def local_client(local_settings: Settings, admin: User) -> FlaskClient:
    client = create_app(test_config={"TESTING": True}, settings=local_settings).test_client()
    login(client, admin.email)
    return client


def _local_connector(db: Session, org: Organization) -> Connector:
    return make_connector(db, org, account_id=LOCAL_ACCOUNT, role_arn=LOCAL_ROLE_ARN)


def _role_trusting(aws: str, connector: Connector, *external_ids: str) -> None:
    """The connector's role in the local IAM, trusting exactly ``external_ids`` (created or updated)."""
    spec = replace(
        RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID),
        external_id=external_ids[0],
        new_external_id=external_ids[1] if len(external_ids) > 1 else None,
    )
    iam = boto3.client("iam", endpoint_url=aws, region_name="us-east-1")
    try:
        iam.get_role(RoleName=spec.role_name)
    except iam.exceptions.NoSuchEntityException:
        create_role_through_iam(aws, spec)
        return
    trust = cloudformation.expected_policies(spec)["trust_policy"]
    iam.update_assume_role_policy(RoleName=spec.role_name, PolicyDocument=json.dumps(trust))


def test_save_during_a_rotation_checks_the_new_id(
    local_client: FlaskClient, db: Session, org: Organization, s3: Any, aws: str
) -> None:
    connector = _local_connector(db, org)
    current = connector.external_id
    _role_trusting(aws, connector, current)  # the stack as first deployed
    _press(local_client, connector, "rotate-external-id")
    new = _reload(db, connector).new_external_id
    assert new

    # The stack not updated yet: the role does not accept the new ID, and Save says so.
    page = save_failing(local_client, connector.id).replace("&#39;", "'")
    assert f"Could not assume the trust role {LOCAL_ROLE_ARN}: the role's trust policy does not let" in page
    assert _reload(db, connector).rotation_state is RotationState.PENDING

    _role_trusting(aws, connector, current, new)  # updated with the downloaded template
    assert save(local_client, connector.id).status_code == 302
    connector = _reload(db, connector)
    assert connector.rotation_state is RotationState.VERIFIED
    assert (connector.external_id, connector.old_external_id) == (new, current)
    assert len(_audited(db, Action.ROTATION_VERIFIED)) == 1
    card = _card(local_client)
    assert (
        "Exports now use the new External ID. Update the stack again with the template downloaded now" in card
    )
    assert "Not checked yet" in card
    assert _external_id_defaults(local_client, connector) == (new, "")


# -- exports ----------------------------------------------------------------------------------------------


def test_exports_use_the_current_id_until_save_verifies_the_new_one(
    settings: Settings, db: Session, org: Organization, s3: Any
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    rotations.start_rotation(db, connector)
    db.commit()
    new = connector.new_external_id

    clients = RecordingClients(settings)
    pending_run = make_run(db, connector).id
    assert run_export(settings, pending_run, clients=clients) is not None
    assert clients.external_ids == [current]  # and no old-ID check: there is no old ID yet

    rotations.activate_checked(connector, WriteCheckResult(connector.role_arn or "", "us-east-1"))
    db.commit()
    clients = RecordingClients(settings)
    verified_run = make_run(db, connector).id
    assert run_export(settings, verified_run, clients=clients) is not None
    # The old-ID check, then the export itself with the new ID.
    assert clients.external_ids == [current, new]
    db.expire_all()
    assert {run.status for run in _reload(db, connector).runs} == {RunStatus.SUCCEEDED}


def test_each_export_records_whether_the_old_id_still_works_until_the_stack_drops_it(
    local_settings: Settings, local_client: FlaskClient, db: Session, org: Organization, s3: Any, aws: str
) -> None:
    connector = _local_connector(db, org)
    current = connector.external_id
    rotations.start_rotation(db, connector)
    new = connector.new_external_id or ""
    _role_trusting(aws, connector, current, new)
    rotations.activate_checked(connector, WriteCheckResult(LOCAL_ROLE_ARN, "us-east-1"))
    db.commit()

    assert run_export(local_settings, make_run(db, connector).id) is not None
    connector = _reload(db, connector)
    assert (connector.rotation_state, connector.old_external_id_works) == (RotationState.VERIFIED, True)
    checked = connector.old_external_id_checked_at
    assert checked is not None
    card = _card(local_client)
    assert f"Yes, checked at {checked.strftime('%Y-%m-%d %H:%M UTC')}" in card
    assert "the role still trusts the old one (checked at" in card

    _role_trusting(aws, connector, new)  # the stack updated again with the new ID only
    assert run_export(local_settings, make_run(db, connector).id) is not None
    connector = _reload(db, connector)
    assert (connector.rotation_state, connector.old_external_id_works) == (RotationState.COMPLETE, False)
    card = _card(local_client)
    assert "Rotation complete: the old External ID no longer works (checked at" in card
    assert "Rotate External ID" in card  # another rotation may start
    completed = _audited(db, Action.ROTATION_COMPLETED)
    assert [(e.target_id, e.organization_id) for e in completed] == [(connector.id, org.id)]
    assert _external_id_defaults(local_client, connector) == (new, "")


# -- what real STS answers (Stubber): only AccessDenied means "no longer works" -----------------------------

STUB_SETTINGS = Settings(
    database_url="sqlite://",
    redis_url="redis://127.0.0.1:6379/0",
    secret_key="x" * 32,
    vendor_account_id="123456789012",
    aws_endpoint_url=None,
    aws_region="us-east-1",
    require_external_id_enforcement=True,
    export_queue="exports",
    local_mode=False,
)
OLD = Destination(
    bucket=BUCKET,
    prefix=PREFIX,
    account_id="210987654321",
    role_arn="arn:aws:iam::210987654321:role/FoundationalOpenLineageExport",
    external_id="olx-the-old-external-id-0123456789abcdef",
)


class StubbedSts:
    def __init__(self) -> None:
        keys = {"region_name": "us-east-1", "aws_access_key_id": "a", "aws_secret_access_key": "b"}
        self.client = boto3.client("sts", **keys)
        self.stubber = Stubber(self.client)
        self.stubber.activate()

    def sts(self) -> Any:
        return self.client

    def s3(self, credentials: Any, region: str) -> Any:
        raise AssertionError("the old-ID check never uses S3")


@pytest.mark.parametrize(
    ("answer", "works"),
    [("credentials", True), ("AccessDenied", False), ("Throttling", None), ("InternalFailure", None)],
)
def test_only_a_refusal_counts_as_no_longer_working(answer: str, works: bool | None) -> None:
    stub = StubbedSts()
    expected = {
        "RoleArn": OLD.role_arn,
        "RoleSessionName": "openlineage-export",
        "DurationSeconds": 3600,
        "ExternalId": OLD.external_id,
    }
    if answer == "credentials":
        credentials = {
            "AccessKeyId": "ASIAEXAMPLEEXAMPLE01",
            "SecretAccessKey": "s" * 40,
            "SessionToken": "t" * 20,
            "Expiration": "2030-01-01T00:00:00Z",
        }
        stub.stubber.add_response("assume_role", {"Credentials": credentials}, expected)
    else:
        stub.stubber.add_client_error("assume_role", service_error_code=answer, expected_params=expected)
    assert old_id_works(STUB_SETTINGS, OLD, stub) is works
    stub.stubber.assert_no_pending_responses()


def test_an_unknown_answer_records_nothing(settings: Settings, db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    rotations.start_rotation(db, connector)
    rotations.activate_checked(connector, WriteCheckResult(connector.role_arn or "", "us-east-1"))
    db.commit()
    stub = StubbedSts()
    stub.stubber.add_client_error("assume_role", service_error_code="Throttling")
    check_old_external_id(settings, connector.id, stub)  # never raises
    connector = _reload(db, connector)
    assert (connector.rotation_state, connector.old_external_id_works) == (RotationState.VERIFIED, None)
    assert connector.old_external_id_checked_at is None


def test_a_rendered_template_with_two_ids_passes_cfn_lint(db: Session, org: Organization) -> None:
    from cfnlint.api import ManualArgs, lint

    connector = make_connector(db, org)
    rotations.start_rotation(db, connector)
    rendered = cloudformation.render_template(RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID))
    regions = ["us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1"]
    findings = lint(rendered, config=ManualArgs(regions=regions, include_checks=["I"]))
    assert [str(finding) for finding in findings] == []
