"""The connections API: scopes, tenant isolation, the wizard's rules and messages, the audit trail."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, inspect, select
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import Scope, key_prefix_of
from lineage_core.infra.config import Settings
from lineage_core.infra.models import (
    AuditEvent,
    Connector,
    ConnectorStatus,
    ExportRun,
    Organization,
    RunStatus,
)
from lineage_core.setup import destination as rules
from portal import create_app
from portal.api.connection_json import camel
from portal.api.write_check_fields import write_check_problems
from portal.forms import ParsedBy
from portal.integrations.forms import ConnectionForm
from portal.integrations.lifecycle import EXTERNAL_ID_IS_OURS, SETTINGS_PARSERS
from tests.connections_api import BASE, SETTINGS, call, scoped_key
from tests.factories import make_connector, make_org, make_run
from tests.web import login, post_form


@pytest.fixture
def key(db: Session, org: Organization) -> str:
    return scoped_key(db, org, Scope.CONNECTIONS_WRITE)


def _audit(db: Session, action: str) -> list[AuditEvent]:
    db.expire_all()
    rows = list(db.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)))
    db.rollback()
    return rows


def _connectors(db: Session) -> int:
    db.expire_all()
    count = db.scalar(select(func.count()).select_from(Connector)) or 0
    db.rollback()
    return count


def _routes(app: Flask, connector_id: int) -> list[tuple[str, str]]:
    routes = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("connections_api.") and "<int:connector_id>" in rule.rule:
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                routes.append((method, rule.rule.replace("<int:connector_id>", str(connector_id))))
    return routes


# Creating and reading -----------------------------------------------------------------------------------


def test_a_bare_draft_answers_its_id_external_id_and_download_links(
    client: FlaskClient, db: Session, key: str
) -> None:
    response = call(client, "POST", BASE, key)
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["status"] == "draft" and body["settingsComplete"] is False
    assert re.fullmatch(r"olx-[A-Za-z0-9_-]{32}", body["externalId"])
    assert response.headers["Location"] == f"http://localhost{BASE}/{body['id']}"
    assert body["links"] == {
        "self": f"http://localhost{BASE}/{body['id']}",
        "cloudformation": f"http://localhost{BASE}/{body['id']}/cloudformation",
        "terraform": f"http://localhost{BASE}/{body['id']}/terraform",
        "runs": f"http://localhost{BASE}/{body['id']}/runs",
    }
    # The downloads need the settings first, and say so.
    download = call(client, "GET", body["links"]["cloudformation"], key)
    assert download.status_code == 409 and download.get_json()["error"] == "settings_incomplete"
    assert response.headers["Cache-Control"] == "no-store"


def test_a_draft_with_settings_stores_them_as_the_wizard_would(
    client: FlaskClient, db: Session, key: str, org: Organization
) -> None:
    sent = {**SETTINGS, "accountId": "1234-5678-9012", "prefix": "/foundational/openlineage/"}
    body = call(client, "POST", BASE, key, sent).get_json()
    assert body["settings"] == {
        "bucket": "acme-lineage",
        "prefix": "foundational/openlineage",
        "accountId": "123456789012",
        "roleName": "FoundationalOpenLineageExport",
        "rolePath": "/",
        "intervalDays": 14,
        "kmsKeyArn": None,
        "permissionsBoundaryArn": None,
    }
    assert body["exportUrl"] == "s3://acme-lineage/foundational/openlineage/openlineage-events.jsonl"
    listed = call(client, "GET", BASE, key).get_json()["connections"]
    assert [c["id"] for c in listed] == [body["id"]]
    assert call(client, "GET", f"{BASE}/{body['id']}", key).get_json()["externalId"] == body["externalId"]


def test_the_api_and_the_wizard_use_the_same_parsers() -> None:
    # The form's fields are WTForms UnboundFields: their validators are in their kwargs.
    form_parsers = {
        name: parser.parser
        for name, unbound in vars(ConnectionForm).items()
        for parser in getattr(unbound, "kwargs", {}).get("validators", [])
        if isinstance(parser, ParsedBy)
    }
    assert form_parsers == SETTINGS_PARSERS


@pytest.mark.parametrize(
    ("sent", "field", "message"),
    [
        ({"bucket": "s3://acme"}, "bucket", None),
        ({"accountId": "12345"}, "accountId", None),
        ({"intervalDays": 7}, "intervalDays", "The export interval is at least 14 days."),
        ({"prefix": "a b"}, "prefix", None),
        ({"roleName": ""}, "roleName", "Enter the IAM role name."),
    ],
)
def test_a_wrong_setting_is_refused_with_the_wizards_message_and_nothing_is_created(
    client: FlaskClient, db: Session, key: str, sent: dict[str, Any], field: str, message: str | None
) -> None:
    response = call(client, "POST", BASE, key, {**SETTINGS, **sent})
    assert response.status_code == 400
    body = response.get_json()
    assert (body["error"], body["field"]) == ("invalid_settings", field)
    snake = next(name for name in SETTINGS_PARSERS if camel(name) == field)
    with pytest.raises(rules.FieldError) as expected:
        SETTINGS_PARSERS[snake](str(next(iter(sent.values()))))
    assert body["message"] == str(expected.value) == (message or str(expected.value))
    assert body["problems"] == [{"field": field, "code": "invalid_setting", "message": body["message"]}]
    assert _connectors(db) == 0
    assert _audit(db, "connection.created") == []


def test_every_wrong_setting_is_named_at_once(client: FlaskClient, db: Session, key: str) -> None:
    body = call(client, "POST", BASE, key, {"bucket": "UPPER", "accountId": "x"}).get_json()
    assert [p["field"] for p in body["problems"]] == ["bucket", "accountId", "roleName"]


@pytest.mark.parametrize(
    ("sent", "status", "error", "field"),
    [
        ({"externalId": "olx-mine"}, 400, "external_id_read_only", "externalId"),
        ({"bucket_name": "x"}, 400, "unknown_field", "bucket_name"),
        ({"bucket": 12}, 400, "invalid_type", "bucket"),
        (["not", "an", "object"], 400, "malformed_body", "body"),
    ],
)
def test_bodies_that_are_not_settings_are_refused(
    client: FlaskClient, db: Session, key: str, sent: Any, status: int, error: str, field: str
) -> None:
    response = call(client, "POST", BASE, key, sent)
    assert response.status_code == status
    assert (response.get_json()["error"], response.get_json()["field"]) == (error, field)
    if error == "external_id_read_only":
        assert response.get_json()["message"] == EXTERNAL_ID_IS_OURS
    assert _connectors(db) == 0


def test_a_body_that_is_not_json_is_415(client: FlaskClient, key: str) -> None:
    response = call(
        client, "POST", BASE, key, data="bucket=x", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415 and response.get_json()["field"] == "Content-Type"


# Changing ------------------------------------------------------------------------------------------------


def test_patch_changes_only_what_it_sends_and_the_audit_names_the_key(
    client: FlaskClient, db: Session, key: str, org: Organization
) -> None:
    connector = make_connector(db, org)
    response = call(client, "PATCH", f"{BASE}/{connector.id}", key, {"intervalDays": "30"})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["roleChanged"] is False and body["connection"]["status"] == "active"
    assert body["connection"]["settings"]["intervalDays"] == 30
    assert body["connection"]["settings"]["bucket"] == connector.bucket
    entry = _audit(db, "connection.edited")[-1]
    assert entry.actor == key_prefix_of(key) and entry.organization_id == org.id
    assert entry.target_id == connector.id and entry.request_id and entry.address == "127.0.0.1"
    assert '"interval_days":[14,30]' in (entry.details or "")
    assert key[12:] not in (entry.details or "") and connector.external_id not in (entry.details or "")

    moved = call(client, "PATCH", f"{BASE}/{connector.id}", key, {"prefix": "elsewhere"}).get_json()
    assert moved["roleChanged"] is True and moved["connection"]["status"] == "draft"
    assert "Download the template again" in moved["message"]


def test_a_destination_another_connection_uses_is_refused_on_prefix(
    client: FlaskClient, db: Session, key: str, org: Organization
) -> None:
    make_connector(db, make_org(db, "globex"), bucket="acme-lineage", prefix="shared")
    response = call(client, "POST", BASE, key, {**SETTINGS, "prefix": "shared"})
    assert response.status_code == 400
    body = response.get_json()
    assert body["field"] == "prefix"
    assert body["message"].startswith("Another connection already exports to s3://acme-lineage/shared/")
    assert _connectors(db) == 1


# Activating, exporting, pausing, deleting ---------------------------------------------------------------


def test_a_failed_write_check_answers_the_spec_sentence_and_the_field(
    client: FlaskClient, db: Session, key: str, aws: str
) -> None:
    created = call(client, "POST", BASE, key, {**SETTINGS, "bucket": "no-such-bucket"}).get_json()
    response = call(client, "POST", f"{BASE}/{created['id']}/activate", key)
    assert response.status_code == 422
    body = response.get_json()
    assert body["error"] == "write_check_failed" and body["field"] == "bucket"
    assert body["message"].startswith("Could not write to s3://no-such-bucket/foundational/openlineage/")
    assert "does not exist" in body["message"]
    stored = call(client, "GET", f"{BASE}/{created['id']}", key).get_json()
    assert (stored["status"], stored["lastCheckError"]) == ("draft", body["message"])
    assert stored["externalId"] == created["externalId"]
    assert [e.actor for e in _audit(db, "connection.save_failed")] == [key_prefix_of(key)]


def test_activating_an_incomplete_draft_is_409(client: FlaskClient, key: str) -> None:
    created = call(client, "POST", BASE, key).get_json()
    response = call(client, "POST", f"{BASE}/{created['id']}/activate", key)
    assert (response.status_code, response.get_json()["error"]) == (409, "settings_incomplete")


def test_trust_failures_name_the_account_and_role(db: Session, org: Organization) -> None:
    connector = make_connector(db, org, role_path="/integrations/")
    message = "Could not assume the trust role arn:aws:iam::1:role/x: AccessDenied. Check that the stack..."
    problems = write_check_problems(message, connector)
    assert [p.field for p in problems] == ["accountId", "roleName", "rolePath"]
    assert {p.message for p in problems} == {message}
    kms = make_connector(db, org, bucket="other", kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/k")
    refused = (
        "Could not write to s3://other/x: PutObject failed, AccessDenied. "
        "Check the bucket name, and that the role's policy covers the bucket and prefix. For SSE-KMS, "
        "also check that the role may use the key (kms:GenerateDataKey, kms:Decrypt)."
    )
    assert [p.field for p in write_check_problems(refused, kms)] == ["bucket", "prefix", "kmsKeyArn"]


def test_export_now_pause_resume_delete_through_the_api(
    client: FlaskClient, db: Session, key: str, org: Organization, settings: Settings
) -> None:
    connector = make_connector(db, org)
    url = f"{BASE}/{connector.id}"
    started = call(client, "POST", f"{url}/exports", key)
    assert started.status_code == 202, started.get_json()
    assert started.get_json()["run"]["status"] == "queued"
    again = call(client, "POST", f"{url}/exports", key)
    assert (again.status_code, again.get_json()["error"]) == (409, "export_in_flight")
    assert again.get_json()["message"] == "An export of this connection is already queued or running."

    paused = call(client, "POST", f"{url}/pause", key).get_json()
    assert paused["changed"] is True and paused["connection"]["status"] == "paused"
    assert call(client, "POST", f"{url}/pause", key).get_json()["changed"] is False
    refused = call(client, "POST", f"{url}/exports", key)
    assert (refused.status_code, refused.get_json()["error"]) == (409, "not_active")
    assert call(client, "POST", f"{url}/resume", key).get_json()["connection"]["status"] == "active"

    assert call(client, "DELETE", url, key).status_code == 204
    assert call(client, "GET", url, key).status_code == 404
    actions = [
        "connection.export_requested",
        "connection.paused",
        "connection.resumed",
        "connection.deleted",
    ]
    for action in actions:
        assert [e.actor for e in _audit(db, action)] == [key_prefix_of(key)], action


def test_runs_list_every_column_of_a_run_but_the_workers_bookkeeping(
    client: FlaskClient, db: Session, key: str, org: Organization
) -> None:
    connector = make_connector(db, org)
    make_run(db, connector, RunStatus.SUCCEEDED, events=9, bytes=1234, etag='"e"', trimmed=0, omitted=0)
    make_run(db, connector, RunStatus.QUEUED)
    runs = call(client, "GET", f"{BASE}/{connector.id}/runs", key).get_json()["runs"]
    assert [r["status"] for r in runs] == ["queued", "succeeded"]
    internal = {"connector_id", "lease_owner", "lease_expires_at", "completing", "job_id"}
    expected = {camel(c.key) for c in inspect(ExportRun).columns if c.key not in internal}
    assert set(runs[1]) == expected
    assert (runs[1]["events"], runs[1]["bytes"]) == (9, 1234)
    assert call(client, "GET", f"{BASE}/{connector.id}/runs?limit=1", key).get_json()["runs"] == runs[:1]
    bad = call(client, "GET", f"{BASE}/{connector.id}/runs?limit=0", key)
    assert (bad.status_code, bad.get_json()["field"]) == (400, "limit")


def test_the_downloads_are_the_portals_own(
    client: FlaskClient, admin_client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    connector = make_connector(
        db, org, status=ConnectorStatus.DRAFT, bucket="acme-lineage", account_id="123456789012", role_name="R"
    )
    api_client = client.application.test_client()
    template = call(api_client, "GET", f"{BASE}/{connector.id}/cloudformation", key)
    portal_template = admin_client.get(f"/integrations/openlineage/{connector.id}/template.yaml")
    assert template.status_code == 200 and template.mimetype == "application/x-yaml"
    assert template.data == portal_template.data
    assert connector.external_id in template.get_data(as_text=True)
    assert template.headers["Content-Disposition"] == portal_template.headers["Content-Disposition"]
    bundle = call(api_client, "GET", f"{BASE}/{connector.id}/terraform", key)
    portal_bundle = admin_client.get(f"/integrations/openlineage/{connector.id}/terraform.zip")
    assert bundle.mimetype == "application/zip" and bundle.headers["Cache-Control"] == "no-store"
    ours, theirs = zipfile.ZipFile(io.BytesIO(bundle.data)), zipfile.ZipFile(io.BytesIO(portal_bundle.data))
    assert {n: ours.read(n) for n in ours.namelist()} == {n: theirs.read(n) for n in theirs.namelist()}


# Keys, scopes, organizations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scopes", "method", "path", "needed"),
    [
        ((Scope.LINEAGE_WRITE,), "GET", "", "connections:read"),
        ((Scope.LINEAGE_WRITE,), "GET", "/{id}/cloudformation", "connections:read"),
        ((Scope.CONNECTIONS_READ,), "POST", "", "connections:write"),
        ((Scope.CONNECTIONS_READ,), "PATCH", "/{id}", "connections:write"),
        ((Scope.CONNECTIONS_READ,), "POST", "/{id}/activate", "connections:write"),
        ((Scope.CONNECTIONS_READ,), "DELETE", "/{id}", "connections:write"),
        ((Scope.CONNECTIONS_READ, Scope.LINEAGE_WRITE), "POST", "/{id}/pause", "connections:write"),
    ],
)
def test_a_key_outside_its_scope_is_refused_403_naming_the_scope(
    client: FlaskClient,
    db: Session,
    org: Organization,
    scopes: tuple[Scope, ...],
    method: str,
    path: str,
    needed: str,
) -> None:
    connector = make_connector(db, org)
    key = scoped_key(db, org, *scopes)
    response = call(client, method, BASE + path.format(id=connector.id), key, {"intervalDays": 30})
    assert response.status_code == 403
    body = response.get_json()
    assert (body["error"], body["field"]) == ("insufficient_scope", "Authorization")
    assert body["message"] == (
        f"This API key may not {needed}; an org admin can create a key with that scope."
    )
    db.expire_all()
    assert db.get(Connector, connector.id) is not None and connector.status is ConnectorStatus.ACTIVE
    assert _audit(db, "connection.edited") == [] and _audit(db, "connection.deleted") == []


def test_write_implies_read_and_read_reads(client: FlaskClient, db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    for scope in (Scope.CONNECTIONS_READ, Scope.CONNECTIONS_WRITE):
        key = scoped_key(db, org, scope)
        assert call(client, "GET", f"{BASE}/{connector.id}", key).status_code == 200
        assert call(client, "GET", f"{BASE}/{connector.id}/runs", key).status_code == 200


def test_another_organizations_connection_is_404_on_every_route(
    app: Flask, client: FlaskClient, db: Session, org: Organization
) -> None:
    victim = make_connector(db, org)
    intruder = scoped_key(db, make_org(db, "globex"), Scope.CONNECTIONS_WRITE)
    routes = _routes(app, victim.id)
    assert len(routes) >= 10
    for method, url in routes:
        response = call(client, method, url, intruder, {"bucket": "stolen"} if method == "PATCH" else None)
        assert response.status_code == 404, (method, url, response.status_code)
        assert response.get_json()["error"] == "not_found"
    assert call(client, "GET", BASE, intruder).get_json() == {"connections": []}
    db.expire_all()
    stored = db.get(Connector, victim.id)
    assert stored is not None and (stored.bucket, stored.status) == ("acme-lineage", ConnectorStatus.ACTIVE)
    assert _audit(db, "connection.deleted") == [] and _audit(db, "connection.edited") == []


def test_a_key_of_another_organization_than_x_organization_is_refused(
    client: FlaskClient, org: Organization, key: str
) -> None:
    response = call(client, "GET", BASE, key, headers={"X-Organization": "globex"})
    assert (response.status_code, response.get_json()["error"]) == (403, "wrong_organization")
    assert call(client, "GET", BASE, key, headers={"X-Organization": "acme"}).status_code == 200


@pytest.mark.parametrize(
    ("header", "error"),
    [(None, "missing_api_key"), ("Bearer olk_nope", "invalid_api_key"), ("Basic abc", "invalid_api_key")],
)
def test_no_valid_key_is_401(client: FlaskClient, header: str | None, error: str) -> None:
    response = client.get(BASE, headers={"Authorization": header} if header else {})
    assert response.status_code == 401
    assert response.get_json()["error"] == error and response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_session_cookie_is_not_a_key(admin_client: FlaskClient) -> None:
    assert admin_client.get(BASE).status_code == 401


def test_bad_keys_are_rate_limited_as_on_the_ingest_endpoint(settings: Settings) -> None:
    app = create_app(
        test_config={"TESTING": True, "API_KEY_LIMIT_PER_ADDRESS": "3 per minute"}, settings=settings
    )
    client = app.test_client()
    answers = [
        call(client, "GET", BASE, f"olk_{i:08x}_" + "x" * 43, environ_base={"REMOTE_ADDR": "203.0.113.9"})
        for i in range(4)
    ]
    assert [a.status_code for a in answers] == [401, 401, 401, 429]
    assert answers[-1].get_json()["error"] == "rate_limited" and int(answers[-1].headers["Retry-After"]) > 0


def test_a_revoked_key_stops_working(
    client: FlaskClient, admin_client: FlaskClient, db: Session, key: str
) -> None:
    assert call(client, "GET", BASE, key).status_code == 200
    listing = admin_client.get("/api-keys/").get_data(as_text=True)
    revoke = re.search(r'href="(/api-keys/(\d+)/revoke)"', listing)
    assert revoke
    assert post_form(admin_client, revoke.group(1), revoke.group(1), {}).status_code == 302
    response = call(client, "GET", BASE, key)
    assert (response.status_code, response.get_json()["error"]) == (401, "revoked_api_key")


def test_login_does_not_leak_into_the_api(client: FlaskClient, admin: Any) -> None:
    login(client, admin.email)
    assert client.get(f"{BASE}/1").status_code == 401


# External ID rotation -----------------------------------------------------------------------------------


def test_rotation_starts_and_cancels_through_the_api(
    client: FlaskClient, db: Session, key: str, org: Organization
) -> None:
    connector = make_connector(db, org)
    url = f"{BASE}/{connector.id}/rotation"
    assert call(client, "GET", f"{BASE}/{connector.id}", key).get_json()["rotation"]["state"] == "none"

    started = call(client, "POST", url, key)
    assert started.status_code == 200, started.get_json()
    rotation = started.get_json()["rotation"]
    assert rotation["state"] == "pending"
    assert rotation["externalId"] == connector.external_id and rotation["newExternalId"]
    assert started.get_json()["connection"]["rotation"] == rotation
    # The template now trusts both IDs.
    template = call(client, "GET", f"{BASE}/{connector.id}/cloudformation", key).get_data(as_text=True)
    assert connector.external_id in template and rotation["newExternalId"] in template

    again = call(client, "POST", url, key)
    assert (again.status_code, again.get_json()["error"], again.get_json()["field"]) == (
        409,
        "rotation_refused",
        "rotation",
    )
    cancelled = call(client, "DELETE", url, key)
    assert cancelled.status_code == 200 and cancelled.get_json()["rotation"]["state"] == "none"
    assert call(client, "DELETE", url, key).status_code == 409
    prefix = key_prefix_of(key)
    assert [e.actor for e in _audit(db, "connection.external_id_rotation_started")] == [prefix]
    assert [e.actor for e in _audit(db, "connection.external_id_rotation_cancelled")] == [prefix]


def test_a_draft_cannot_rotate(client: FlaskClient, db: Session, key: str, org: Organization) -> None:
    connector = make_connector(db, org, status=ConnectorStatus.DRAFT)
    response = call(client, "POST", f"{BASE}/{connector.id}/rotation", key)
    assert response.status_code == 409 and "Finish the setup" in response.get_json()["message"]
    assert _audit(db, "connection.external_id_rotation_started") == []
