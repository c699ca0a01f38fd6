"""Save runs the write check against the local AWS (moto server over HTTP) and activates the connector."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import requests
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq import Queue
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.demo.local_stack import deploy_template, stack_name_for
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus
from lineage_core.setup.cloudformation import render_template
from lineage_core.setup.role_spec import RoleSpec
from portal import create_app
from tests.factories import create_bucket, create_role_through_iam
from tests.services import VENDOR_ACCOUNT_ID, s3_client
from tests.web import FORM, login, post_form, save, save_failing, start_and_fill


def _spec(connector: Connector) -> RoleSpec:
    return RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)


def test_download_deploy_save_activates_and_queues_the_first_export(
    aws: str, settings: Settings, admin_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(admin_client, db)
    template = admin_client.get(f"/integrations/openlineage/{connector.id}/template.yaml")
    assert template.status_code == 200
    assert "attachment" in template.headers["Content-Disposition"]
    deploy_template(settings, template.get_data(as_text=True), stack_name_for(connector.role_name or ""))

    response = save(admin_client, connector.id)
    assert response.status_code == 302, response.get_data(as_text=True)[-1500:]
    db.expire_all()
    connector = db.get(Connector, connector.id)
    assert connector is not None
    assert connector.status is ConnectorStatus.ACTIVE
    assert connector.role_arn == f"arn:aws:iam::123456789012:role/{connector.role_name}"
    assert connector.bucket_region == "us-east-1"
    assert connector.verified_at is not None

    # The probe is gone, nothing else was written.
    s3 = s3_client(aws)
    assert s3.list_objects_v2(Bucket="acme-lineage").get("KeyCount") == 0

    # The first export is queued: a run row in the database and its job on the export queue.
    run = db.scalars(select(ExportRun).where(ExportRun.connector_id == connector.id)).one()
    assert (run.status, run.trigger) == (RunStatus.QUEUED, "first")
    queue = Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url))
    assert queue.job_ids == [f"export-run-{run.id}"]
    assert queue.fetch_job(f"export-run-{run.id}").args == (run.id,)

    # <wbr> lets long values wrap at their separators; the text is the same without them.
    card = admin_client.get("/integrations/openlineage").get_data(as_text=True).replace("<wbr>", "")
    assert "Export queued" in card
    assert connector.role_arn in card
    assert "No export yet" in card
    assert "14 days" in card


def test_saving_twice_never_queues_a_second_export(
    aws: str, settings: Settings, admin_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(admin_client, db)
    create_role_through_iam(aws, _spec(connector))
    assert save(admin_client, connector.id).status_code == 302
    assert save(admin_client, connector.id).status_code == 302
    assert len(db.scalars(select(ExportRun)).all()) == 1


def test_missing_bucket_shows_could_not_write_and_keeps_the_draft(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    connector = start_and_fill(admin_client, db)
    create_role_through_iam(aws, _spec(connector))
    html = save_failing(admin_client, connector.id)
    assert "Could not write to s3://acme-lineage/foundational/openlineage/" in html
    assert "does not exist" in html
    db.expire_all()
    stored = db.get(Connector, connector.id)
    assert stored is not None
    assert stored.status is ConnectorStatus.DRAFT
    assert stored.external_id == connector.external_id
    assert stored.last_check_error and "Could not write" in stored.last_check_error
    assert db.scalars(select(ExportRun)).all() == []

    # The admin fixes the cause and saves again: same draft, same External ID.
    create_bucket(aws)
    assert save(admin_client, connector.id).status_code == 302
    db.expire_all()
    assert db.get(Connector, connector.id).status is ConnectorStatus.ACTIVE  # type: ignore[union-attr]


def _enforce_after_assume_role(endpoint: str) -> None:
    """Turn moto's IAM enforcement on for every request after the next one.

    The next request is the write check's AssumeRole: moto refuses sts:AssumeRole under enforcement
    even to a caller allowed "*" (measured), so it runs unauthenticated, and every S3 call after it
    is checked against the assumed role's policy, which is what these tests are about.
    """
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"1", timeout=10)


def test_role_without_the_prefix_shows_could_not_write_with_the_reason(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(admin_client, db, prefix="exports/lineage")
    # The deployed role covers another prefix (a stale stack from an earlier setup, say).
    create_role_through_iam(aws, replace(_spec(connector), prefix="exports/other"))
    _enforce_after_assume_role(aws)
    html = save_failing(admin_client, connector.id)
    assert "Could not write to s3://acme-lineage/exports/lineage/.foundational-export-writecheck" in html
    assert "PutObject failed, AccessDenied" in html
    assert "the role&#39;s policy covers the bucket and prefix" in html


def test_role_exactly_as_templated_passes_with_enforcement_on(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    create_bucket(aws)
    connector = start_and_fill(admin_client, db, prefix="a/b")
    create_role_through_iam(aws, _spec(connector))
    _enforce_after_assume_role(aws)
    response = save(admin_client, connector.id)
    assert response.status_code == 302, response.get_data(as_text=True)[-1500:]


def test_aws_unreachable_is_reported_as_could_not_assume(
    settings: Settings, client: FlaskClient, admin: object, db: Session
) -> None:
    dead = replace(settings, aws_endpoint_url="http://127.0.0.1:9")
    app: Flask = create_app(test_config={"TESTING": True}, settings=dead)
    client = app.test_client()
    login(client, "admin@acme.test")
    connector = start_and_fill(client, db)
    html = save_failing(client, connector.id)
    role = "arn:aws:iam::123456789012:role/FoundationalOpenLineageExport"
    assert f"Could not assume the trust role {role}" in html


def _active_connector(aws: str, client: FlaskClient, db: Session) -> Connector:
    create_bucket(aws)
    connector = start_and_fill(client, db)
    create_role_through_iam(aws, _spec(connector))
    assert save(client, connector.id).status_code == 302
    return connector


def _edit(client: FlaskClient, connector: Connector, **changes: str) -> Any:
    url = f"/integrations/openlineage/{connector.id}/setup"
    return post_form(client, url, None, {**FORM, **changes})


def test_editing_the_interval_keeps_the_connector_active(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    connector = _active_connector(aws, admin_client, db)
    response = _edit(admin_client, connector, interval_days="30")
    assert response.headers["Location"].endswith("/integrations/openlineage")
    db.expire_all()
    stored = db.get(Connector, connector.id)
    assert stored is not None and stored.status is ConnectorStatus.ACTIVE and stored.interval_days == 30


def test_editing_the_prefix_sends_the_admin_through_download_and_check_again(
    aws: str, admin_client: FlaskClient, db: Session
) -> None:
    connector = _active_connector(aws, admin_client, db)
    response = _edit(admin_client, connector, prefix="elsewhere")
    assert response.headers["Location"].endswith(f"/integrations/openlineage/{connector.id}/deploy")
    db.expire_all()
    stored = db.get(Connector, connector.id)
    assert stored is not None
    assert stored.status is ConnectorStatus.DRAFT and stored.prefix == "elsewhere" and stored.role_arn is None
    template = admin_client.get(f"/integrations/openlineage/{connector.id}/template.yaml").get_data(
        as_text=True
    )
    assert "elsewhere" in template


def test_delete_removes_the_connector_and_its_runs(aws: str, admin_client: FlaskClient, db: Session) -> None:
    create_bucket(aws)
    connector = start_and_fill(admin_client, db)
    create_role_through_iam(aws, _spec(connector))
    save(admin_client, connector.id)
    response = post_form(
        admin_client, "/integrations/openlineage", f"/integrations/openlineage/{connector.id}/delete", {}
    )
    assert response.status_code == 302
    db.expire_all()
    assert db.scalars(select(Connector)).all() == []
    assert db.scalars(select(ExportRun)).all() == []


def test_several_accounts_each_get_a_card(aws: str, admin_client: FlaskClient, db: Session) -> None:
    first = start_and_fill(admin_client, db, bucket="acme-one")
    second = start_and_fill(admin_client, db, bucket="acme-two", role_name="SecondRole")
    html = admin_client.get("/integrations/openlineage").get_data(as_text=True)
    assert f'id="connector-{first.id}"' in html and f'id="connector-{second.id}"' in html
    assert first.external_id != second.external_id


def test_the_template_download_is_rendered_for_this_connector(admin_client: FlaskClient, db: Session) -> None:
    connector = start_and_fill(
        admin_client, db, kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/abcd-1234"
    )
    body = admin_client.get(f"/integrations/openlineage/{connector.id}/template.yaml").get_data(as_text=True)
    assert render_template(_spec(connector)) == body
    assert connector.external_id in body
