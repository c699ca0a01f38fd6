"""Setup as code: with one key made in the portal, a script sets up an export through the API alone, as
docs/api.md shows: create, deploy the returned template (CloudFormation on the local AWS), activate,
and poll the runs until the first export is in the bucket (written by a real worker process)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import AuditEvent
from tests.connections_api import BASE, SETTINGS, call
from tests.factories import BUCKET, KEY, orders_event
from tests.services import running_process, s3_client
from tests.web import post_form

WAIT_SECONDS = 120  # an upper bound for slow CI machines; no assertion depends on how long anything takes

pytestmark = pytest.mark.slow  # starts a worker process


def _key_from_the_portal(admin_client: FlaskClient) -> str:
    """API keys → Create key, with the scopes a setup script needs (and ingest, to have lineage)."""
    response = post_form(
        admin_client,
        "/api-keys/",
        None,
        {"name": "setup-script", "scopes": ["connections:write", "lineage:write"]},
    )
    assert response.status_code == 201
    secret = re.search(r'id="new-api-key">([^<]+)<', response.get_data(as_text=True))
    assert secret
    return secret.group(1)


def _deploy_stack(endpoint: str, template: str) -> None:
    """What ``aws cloudformation deploy --capabilities CAPABILITY_NAMED_IAM`` does, on the local AWS."""
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, region_name="us-east-1")
    cloudformation.create_stack(
        StackName="FoundationalOpenLineageExport",
        TemplateBody=template,
        Capabilities=["CAPABILITY_NAMED_IAM"],
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        status = cloudformation.describe_stacks(StackName="FoundationalOpenLineageExport")["Stacks"][0]
        if status["StackStatus"] == "CREATE_COMPLETE":
            return
        assert status["StackStatus"] == "CREATE_IN_PROGRESS", status
        time.sleep(0.2)
    raise AssertionError("the stack was not created")


def _first_finished_run(client: FlaskClient, runs_url: str, key: str, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        runs = call(client, "GET", runs_url, key).get_json()["runs"]
        if runs and runs[0]["status"] in ("succeeded", "failed"):
            return dict(runs[0])
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for the first export; worker log:\n{log.read_text()[-5000:]}")


def test_a_script_sets_up_an_export_through_the_api_alone(
    aws: str, settings: Settings, admin_client: FlaskClient, db: Session, tmp_path: Path
) -> None:
    s3 = s3_client(aws)
    s3.create_bucket(Bucket=BUCKET)
    key = _key_from_the_portal(admin_client)
    api = admin_client.application.test_client()  # no session: only the key
    assert call(api, "POST", "/api/v1/lineage", key, orders_event()).status_code == 201

    created = call(api, "POST", BASE, key, SETTINGS)
    assert created.status_code == 201, created.get_json()
    connection = created.get_json()
    template = call(api, "GET", connection["links"]["cloudformation"], key)
    assert template.status_code == 200
    assert connection["externalId"] in template.get_data(as_text=True)
    _deploy_stack(aws, template.get_data(as_text=True))

    activated = call(api, "POST", f"{BASE}/{connection['id']}/activate", key)
    assert activated.status_code == 200, activated.get_json()
    body = activated.get_json()
    assert (body["outcome"], body["run"]["status"], body["run"]["trigger"]) == (
        "first_export_queued",
        "queued",
        "first",
    )
    assert body["message"] == "Connected. The first export is queued and starts in a moment."
    assert body["connection"]["status"] == "active"
    assert body["connection"]["roleArn"] == "arn:aws:iam::123456789012:role/FoundationalOpenLineageExport"

    log = tmp_path / "worker.log"
    with running_process(settings, "worker", log):
        run = _first_finished_run(api, connection["links"]["runs"], key, log)
    assert run["status"] == "succeeded", run["error"]
    exported = s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read()
    assert run["bytes"] == len(exported) and run["events"] == exported.count(b"\n") > 0
    assert b"shop.marts.orders" in exported
    card = call(api, "GET", connection["links"]["self"], key).get_json()["card"]
    assert card["lastStatus"] == "succeeded"

    actions = [
        (e.action, e.actor)
        for e in db.scalars(select(AuditEvent).where(AuditEvent.action.startswith("connection.")))
    ]
    prefix = key[:12]
    assert actions == [
        ("connection.created", prefix),
        ("connection.edited", prefix),
        ("connection.saved", prefix),
    ]
