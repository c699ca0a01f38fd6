"""Editing a saved connection speaks of an edit; one s3://bucket/prefix is one connection's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, Organization, RunStatus, utcnow
from lineage_core.setup.role_spec import RoleSpec
from tests.factories import create_bucket, create_role_through_iam, make_connector, make_org
from tests.services import VENDOR_ACCOUNT_ID
from tests.web import FORM, post_form, save, save_failing, start_and_fill

TAKEN = (
    "Another connection already exports to s3://acme-lineage/foundational/openlineage/: both would "
    "overwrite the one file s3://acme-lineage/foundational/openlineage/openlineage-events.jsonl. "
    "Choose another prefix or bucket."
)


def _spec(connector: Connector) -> RoleSpec:
    return RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)


def _connected(aws: str, client: FlaskClient, db: Session) -> Connector:
    create_bucket(aws)
    connector = start_and_fill(client, db)
    create_role_through_iam(aws, _spec(connector))
    assert save(client, connector.id).status_code == 302
    return connector


def _setup_page(client: FlaskClient, connector: Connector) -> str:
    return str(client.get(f"/integrations/openlineage/{connector.id}/setup").get_data(as_text=True))


def test_a_new_setup_and_an_edit_are_named_apart(aws: str, admin_client: FlaskClient, db: Session) -> None:
    draft = start_and_fill(admin_client, db, prefix="drafts")
    html = _setup_page(admin_client, draft)
    assert "<h1>Set Up New Connection</h1>" in html and 'value="Next"' in html

    connector = _connected(aws, admin_client, db)
    html = _setup_page(admin_client, connector)
    assert "<h1>Edit Connection</h1>" in html and 'value="Save changes"' in html
    assert "Set Up New Connection" not in html


def test_resaving_after_an_edit_is_not_a_first_export(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    connector = _connected(aws, admin_client, db)
    first = db.scalars(select(ExportRun)).one()
    first.status, first.started_at, first.finished_at = RunStatus.SUCCEEDED, utcnow(), utcnow()
    db.commit()
    edited = post_form(
        admin_client,
        f"/integrations/openlineage/{connector.id}/setup",
        None,
        {**FORM, "prefix": "elsewhere"},
    )
    assert edited.headers["Location"].endswith(f"/integrations/openlineage/{connector.id}/deploy")
    deploy = admin_client.get(edited.headers["Location"]).get_data(as_text=True)
    assert "<h1>Update the role in AWS</h1>" in deploy and "update the stack" in deploy
    assert "Deploy the role in AWS" not in deploy

    db.expire_all()
    stored = db.get(Connector, connector.id)
    assert stored is not None
    create_role_through_iam(aws, replace(_spec(stored), role_name="EditedRole"))  # any role: moto
    response = save(admin_client, connector.id)
    assert response.status_code == 302
    page = admin_client.get(response.headers["Location"]).get_data(as_text=True)
    assert "The write check passed. Exports resume: an export is queued and starts in a moment." in page
    assert "first export" not in page
    triggers = db.scalars(select(ExportRun.trigger).order_by(ExportRun.id)).all()
    assert list(triggers) == ["first", "edit"]


@pytest.mark.parametrize("owner", ["same organization", "another organization"])
def test_a_second_connection_to_the_same_bucket_and_prefix_is_refused(
    admin_client: FlaskClient, db: Session, org: Organization, owner: str
) -> None:
    holder = org if owner == "same organization" else make_org(db, "globex")
    make_connector(db, holder)  # saved: s3://acme-lineage/foundational/openlineage/
    response = post_form(admin_client, "/integrations/openlineage/new", None, {})
    setup_url = response.headers["Location"]
    response = post_form(admin_client, setup_url, None, dict(FORM))
    assert response.status_code == 422
    html = response.get_data(as_text=True).replace("&#39;", "'")
    assert f'<p class="error" role="alert">{TAKEN}</p>' in html

    # Another prefix in the same bucket is another file: fine.
    assert post_form(admin_client, setup_url, None, {**FORM, "prefix": "other"}).status_code == 302


def test_another_organizations_unsaved_draft_does_not_hold_a_destination(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    make_connector(
        db, make_org(db, "globex"), status=ConnectorStatus.DRAFT, bucket=FORM["bucket"], prefix=FORM["prefix"]
    )
    connector = start_and_fill(admin_client, db)
    assert connector.bucket == FORM["bucket"]


def test_save_refuses_a_destination_another_connection_saved_meanwhile(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(admin_client, db)
    create_role_through_iam(aws, _spec(connector))
    make_connector(db, make_org(db, "globex"))  # saved by someone else after our Next
    html = save_failing(admin_client, connector.id).replace("&#39;", "'")
    assert TAKEN in html
    db.expire_all()
    assert db.get(Connector, connector.id).status is ConnectorStatus.DRAFT  # type: ignore[union-attr]


def test_the_edit_keeps_its_own_destination(aws: str, admin_client: FlaskClient, db: Session) -> None:
    connector = _connected(aws, admin_client, db)
    response = post_form(
        admin_client, f"/integrations/openlineage/{connector.id}/setup", None, {**FORM, "interval_days": "30"}
    )
    assert response.status_code == 302  # its own bucket and prefix are not "another connection"
