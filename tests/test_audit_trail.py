"""The audit trail: every action of the URL map that changes state writes an entry (a new route without
one fails here), entries carry who, when, where and what changed but never a secret, the database
refuses to change or delete them, and the Audit log page shows each reader what they may see."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import AuditEvent, ConnectorStatus, Organization, Role, User
from lineage_core.ops.audit import Action, Actor, record
from lineage_core.setup import rotations
from portal import create_app
from tests.connections_api_audit import API_SCENARIOS
from tests.factories import make_connector, make_key, make_org, make_user
from tests.web import FORM, PASSWORD, csrf_token_from, login, post_form

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
# State-changing endpoints that are not people's actions, and why they are not in the trail.
NOT_AUDITED = {
    "api.ingest_lineage": "producers' lineage events: the data itself, one per event, counted per key",
    "api.ingest_lineage_batch": "the same events, up to a thousand per request: the data, not an act",
}


def _entries(db: Session, action: str | None = None) -> list[AuditEvent]:
    db.expire_all()
    query = select(AuditEvent).order_by(AuditEvent.id)
    if action is not None:
        query = query.where(AuditEvent.action.startswith(action))
    rows = list(db.scalars(query))
    db.rollback()
    return rows


def _post(client: FlaskClient, url: str, page: str = "/api-keys/", **data: str) -> Any:
    token = csrf_token_from(client.get(page).get_data(as_text=True))
    return client.post(url, data={**data, "csrf_token": token})


# One scenario per endpoint: does the action, returns the action prefix its entry must have. -----------

Scenario = Callable[[Flask, FlaskClient, Session, Organization], str]


def _login(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    return Action.SIGNED_IN


def _logout(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    _post(client, "/logout", page="/integrations/")
    return Action.SIGNED_OUT


def _start(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    post_form(client, "/integrations/openlineage/new", None, {})
    return Action.CONNECTION_CREATED


def _setup(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    connector = make_connector(db, org)
    url = f"/integrations/openlineage/{connector.id}/setup"
    assert post_form(client, url, None, {**FORM, "interval_days": "30"}).status_code == 302
    return Action.CONNECTION_EDITED


def _connector_action(path: str, action: str, status: ConnectorStatus = ConnectorStatus.ACTIVE) -> Scenario:
    def scenario(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
        login(client, "admin@acme.test")
        connector = make_connector(db, org, status=status)
        response = _post(
            client, f"/integrations/openlineage/{connector.id}/{path}", page="/integrations/openlineage"
        )
        assert response.status_code in (200, 302, 422), response.status_code
        return action

    return scenario


def _deploy_local(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    local = create_app(
        test_config={"TESTING": True}, settings=replace(app.config["SETTINGS"], local_mode=True)
    )
    local_client = local.test_client()
    login(local_client, "admin@acme.test")
    connector = make_connector(db, org)
    response = _post(
        local_client,
        f"/integrations/openlineage/{connector.id}/deploy-local",
        page="/integrations/openlineage",
    )
    assert response.status_code == 302
    return Action.CONNECTION_DEPLOYED_LOCALLY


def _cancel_rotation(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    connector = make_connector(db, org)
    rotations.start_rotation(db, connector)
    db.commit()
    url = f"/integrations/openlineage/{connector.id}/cancel-rotation"
    response = _post(client, url, page="/integrations/openlineage")
    assert response.status_code == 302
    return Action.ROTATION_CANCELLED


def _create_key(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    assert _post(client, "/api-keys/", name="airflow-prod").status_code == 201
    return Action.API_KEY_CREATED


def _revoke_key(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    login(client, "admin@acme.test")
    make_key(db, org)
    key_id = db.scalar(text("SELECT id FROM api_keys"))
    db.rollback()
    assert _post(client, f"/api-keys/{key_id}/revoke").status_code == 302
    return Action.API_KEY_REVOKED


def _rq_dashboard(endpoint: str) -> Scenario:
    urls = {
        "rq_dashboard.empty_queue": "/admin/rq/queue/exports/queued/empty",
        "rq_dashboard.compact_queue": "/admin/rq/queue/exports/compact",
        "rq_dashboard.requeue_all": "/admin/rq/requeue/exports",
        "rq_dashboard.delete_job_view": "/admin/rq/job/no-such-job/delete",
        "rq_dashboard.requeue_job_view": "/admin/rq/job/no-such-job/requeue",
    }

    def scenario(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
        make_user(db, None, "ops@vendor.test", Role.OPERATOR)
        login(client, "ops@vendor.test")
        # A POST that changed nothing (an unknown job, an empty queue) may fail, and rq-dashboard's
        # errors propagate under TESTING; one that succeeded is in the trail.
        try:
            response = client.post(urls[endpoint])
        except Exception:
            return ""
        return Action.QUEUE_ACTION if response.status_code < 400 else ""

    return scenario


SCENARIOS: dict[str, Scenario] = {
    "auth.login": _login,
    "auth.logout": _logout,
    "integrations.start": _start,
    "integrations.setup": _setup,
    "integrations.save": _connector_action("save", "connection.save"),
    "integrations.delete": _connector_action("delete", Action.CONNECTION_DELETED),
    "integrations.deploy_local": _deploy_local,
    "integrations.export_now": _connector_action("export-now", Action.CONNECTION_EXPORT_REQUESTED),
    "integrations.pause": _connector_action("pause", Action.CONNECTION_PAUSED),
    "integrations.resume": _connector_action("resume", Action.CONNECTION_RESUMED, ConnectorStatus.PAUSED),
    "integrations.rotate_external_id": _connector_action("rotate-external-id", Action.ROTATION_STARTED),
    "integrations.cancel_rotation": _cancel_rotation,
    "api_keys.create": _create_key,
    "api_keys.revoke": _revoke_key,
    **API_SCENARIOS,  # the connections API's routes
}


def _state_changing_endpoints(app: Flask) -> set[str]:
    return {
        rule.endpoint
        for rule in app.url_map.iter_rules()
        if (rule.methods or set()) & STATE_CHANGING and rule.endpoint not in NOT_AUDITED
    }


def test_every_state_changing_endpoint_has_an_audit_scenario(app: Flask) -> None:
    endpoints = _state_changing_endpoints(app)
    rq = {endpoint for endpoint in endpoints if endpoint.startswith("rq_dashboard.")}
    missing = endpoints - rq - set(SCENARIOS)
    assert not missing, f"routes that change state without an audit test (and entry?): {sorted(missing)}"


def _all_scenarios() -> list[str]:
    # The URL map only: an app that never connects to anything.
    settings = Settings(
        database_url="sqlite://",
        redis_url="redis://127.0.0.1:6379/0",
        secret_key="x" * 20,
        vendor_account_id="123456789012",
        aws_endpoint_url=None,
        aws_region="us-east-1",
        require_external_id_enforcement=False,
        export_queue="exports",
        local_mode=False,
    )
    app = create_app(test_config={"TESTING": True}, settings=settings)
    return sorted(_state_changing_endpoints(app))


@pytest.mark.parametrize("endpoint", _all_scenarios())
def test_each_state_changing_endpoint_writes_its_audit_entry(
    endpoint: str, app: Flask, client: FlaskClient, db: Session, org: Organization, admin: User, aws: str
) -> None:
    scenario = SCENARIOS.get(endpoint) or _rq_dashboard(endpoint)
    before = len(_entries(db))
    action = scenario(app, client, db, org)
    if not action:
        return
    entries = [e for e in _entries(db)[before:] if e.action.startswith(action)]
    assert entries, (endpoint, [e.action for e in _entries(db)])
    entry = entries[-1]
    # A person, or an API key by its prefix (the connections API).
    assert entry.actor in ("admin@acme.test", "ops@vendor.test") or entry.actor.startswith("olk_")
    assert entry.address == "127.0.0.1" and entry.request_id and entry.at is not None
    if not endpoint.startswith("rq_dashboard."):
        assert entry.organization_id == org.id


def test_an_edit_records_what_changed_and_never_the_external_id(
    app: Flask, admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    post_form(
        admin_client, f"/integrations/openlineage/{connector.id}/setup", None, {**FORM, "interval_days": "30"}
    )
    entry = _entries(db, Action.CONNECTION_EDITED)[-1]
    assert '"interval_days":[14,30]' in (entry.details or "")
    for e in _entries(db):
        assert connector.external_id not in (e.details or "")


def test_api_key_entries_name_the_prefix_never_the_secret(admin_client: FlaskClient, db: Session) -> None:
    page = _post(admin_client, "/api-keys/", name="airflow-prod").get_data(as_text=True)
    entry = _entries(db, Action.API_KEY_CREATED)[-1]
    assert "airflow-prod" in (entry.details or "") and "olk_" in (entry.details or "")
    secret_start = page.index("olk_")
    secret = page[secret_start : secret_start + 56]
    assert secret not in (entry.details or "")


def test_a_failed_sign_in_is_recorded_for_the_accounts_organization(
    client: FlaskClient, db: Session, org: Organization, admin: User
) -> None:
    page = client.get("/login").get_data(as_text=True)
    client.post(
        "/login",
        data={"email": admin.email, "password": "wrong password!!", "csrf_token": csrf_token_from(page)},
    )
    entry = _entries(db, Action.SIGN_IN_FAILED)[-1]
    assert (entry.actor, entry.organization_id, entry.target_id) == (admin.email, org.id, admin.id)
    assert "wrong password" not in (entry.details or "")


def test_details_that_name_a_secret_are_refused(db: Session) -> None:
    for name in ("password", "external_id", "secret", "api_token", "key"):
        with pytest.raises(ValueError, match="secret"):
            record(db, Action.API_KEY_CREATED, Actor("cli"), details={name: "x"})


def test_the_database_refuses_to_change_or_delete_entries(db: Session, org: Organization) -> None:
    record(db, Action.ORGANIZATION_CREATED, Actor("cli"), organization_id=org.id)
    db.commit()
    for statement in ("UPDATE audit_events SET actor = 'someone else'", "DELETE FROM audit_events"):
        with pytest.raises(DBAPIError, match="append-only"):
            db.execute(text(statement))
        db.rollback()
    assert len(_entries(db)) == 1


# The Audit log page ------------------------------------------------------------------------------------


@pytest.fixture
def two_orgs(db: Session, org: Organization, admin: User) -> Organization:
    globex = make_org(db, "globex")
    record(
        db, Action.API_KEY_CREATED, Actor("admin@acme.test", admin.id, org.id), details={"name": "acme-key"}
    )
    record(
        db, Action.API_KEY_CREATED, Actor("boss@globex.test", None, globex.id), details={"name": "globex-key"}
    )
    db.commit()
    return globex


def test_org_admins_see_only_their_organizations_entries(
    admin_client: FlaskClient, two_orgs: Organization
) -> None:
    page = admin_client.get("/audit/").get_data(as_text=True)
    assert "acme-key" in page and "globex-key" not in page
    assert "globex-key" not in admin_client.get("/audit/?org=globex&actor=boss").get_data(as_text=True)
    assert 'href="/audit/"' in admin_client.get("/integrations/").get_data(as_text=True)


def test_operators_search_every_organization(
    client: FlaskClient, db: Session, two_orgs: Organization
) -> None:
    make_user(db, None, "ops@vendor.test", Role.OPERATOR)
    login(client, "ops@vendor.test")
    page = client.get("/audit/").get_data(as_text=True)
    assert "acme-key" in page and "globex-key" in page
    by_org = client.get("/audit/?org=globex").get_data(as_text=True)
    assert "globex-key" in by_org and "acme-key" not in by_org
    by_actor = client.get("/audit/?actor=BOSS@").get_data(as_text=True)
    assert "globex-key" in by_actor and "acme-key" not in by_actor
    by_action = client.get("/audit/?action=auth.signed_in").get_data(as_text=True)
    assert "acme-key" not in by_action and "ops@vendor.test" in by_action
    assert client.get("/audit/?before=99999999999999999999").status_code == 200


def test_login_still_uses_the_test_password(client: FlaskClient, admin: User) -> None:
    login(client, admin.email, PASSWORD)
