"""Setup as code: with one key made in the portal, a script sets up an export through the API alone, as
docs/api.md shows: create, deploy the returned template (CloudFormation on the local AWS), activate,
and poll the runs until the first export is in the bucket (written by a real worker process). The same
script then rotates the External ID, with an export at every step and none failing."""

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


def _replace_stack(endpoint: str, template: str) -> None:
    """The stack again from a new template. A real script runs ``aws cloudformation deploy`` (an update);
    moto 5.2's update_stack fails on this template's AWS::IAM::Policy (measured), so the local AWS gets a
    delete and a create, with the same role name, ARN and result."""
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, region_name="us-east-1")
    cloudformation.delete_stack(StackName="FoundationalOpenLineageExport")
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        stacks = cloudformation.list_stacks(StackStatusFilter=["DELETE_COMPLETE"])["StackSummaries"]
        if any(stack["StackName"] == "FoundationalOpenLineageExport" for stack in stacks):
            break
        time.sleep(0.2)
    _deploy_stack(endpoint, template)


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


def _first_finished_run(
    client: FlaskClient, runs_url: str, key: str, log: Path, runs: int = 1
) -> dict[str, Any]:
    """The newest run once ``runs`` runs exist and the newest has finished."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        listed = call(client, "GET", runs_url, key).get_json()["runs"]
        if len(listed) >= runs and listed[0]["status"] in ("succeeded", "failed"):
            return dict(listed[0])
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for export {runs}; worker log:\n{log.read_text()[-5000:]}")


def _rotate_the_external_id(
    api: FlaskClient, aws: str, connection: dict[str, Any], key: str, log: Path
) -> None:
    """Rotate, export while pending, deploy the template with both IDs, activate, export with the new one."""
    self_url, runs_url = connection["links"]["self"], connection["links"]["runs"]
    old_id = connection["externalId"]
    started = call(api, "POST", f"{self_url}/rotation", key)
    assert started.status_code == 200, started.get_json()
    rotation = started.get_json()["connection"]["rotation"]
    assert (rotation["state"], rotation["externalId"]) == ("pending", old_id)
    new_id = rotation["newExternalId"]
    assert new_id and new_id != old_id
    again = call(api, "POST", f"{self_url}/rotation", key)
    assert (again.status_code, again.get_json()["error"]) == (409, "rotation_refused")  # one at a time

    # Until the new ID is verified, exports go on with the current one.
    assert call(api, "POST", f"{self_url}/exports", key).status_code == 202
    assert _first_finished_run(api, runs_url, key, log, runs=2)["status"] == "succeeded"

    template = call(api, "GET", connection["links"]["cloudformation"], key).get_data(as_text=True)
    assert old_id in template and new_id in template  # the trust policy takes both while rotating
    _replace_stack(aws, template)
    activated = call(api, "POST", f"{self_url}/activate", key)
    assert activated.status_code == 200, activated.get_json()
    rotation = activated.get_json()["connection"]["rotation"]
    assert (rotation["state"], rotation["externalId"], rotation["oldExternalId"]) == (
        "verified",
        new_id,
        old_id,
    )

    # Exports now use the new ID, and check whether the role still takes the old one.
    if not any(
        r["status"] in ("queued", "running") for r in call(api, "GET", runs_url, key).get_json()["runs"]
    ):
        assert call(api, "POST", f"{self_url}/exports", key).status_code == 202
    assert _first_finished_run(api, runs_url, key, log, runs=3)["status"] == "succeeded"
    rotation = call(api, "GET", self_url, key).get_json()["rotation"]
    assert rotation["oldIdCheckedAt"] is not None
    template = call(api, "GET", connection["links"]["cloudformation"], key).get_data(as_text=True)
    assert new_id in template
    runs = call(api, "GET", runs_url, key).get_json()["runs"]
    assert [r["status"] for r in runs] == ["succeeded"] * len(runs)  # no failed export on the way


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
        _rotate_the_external_id(api, aws, connection, key, log)

    actions = [
        (e.action, e.actor)
        for e in db.scalars(select(AuditEvent).where(AuditEvent.action.startswith("connection.")))
    ]
    prefix = key[:12]
    assert [action for action, actor in actions if actor == prefix] == [
        "connection.created",
        "connection.edited",
        "connection.saved",
        "connection.external_id_rotation_started",
        "connection.export_requested",
        "connection.external_id_rotation_verified",
        "connection.saved",
        "connection.export_requested",
    ]
    assert len(actions) == 8  # every one by the key: nothing the script did went unrecorded or unnamed
