"""The audit trail's scenarios for the connections API's state-changing routes (tests/test_audit_trail.py).

Each does the route's action with a key scoped connections:write and returns the action prefix its
entry must have; the entry's actor is then the key's prefix.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import Scope
from lineage_core.infra.models import ConnectorStatus, Organization
from lineage_core.ops.audit import Action
from tests.connections_api import BASE, SETTINGS, call, scoped_key
from tests.factories import make_connector

Scenario = Callable[[Flask, FlaskClient, Session, Organization], str]


def _on_connection(
    method: str, path: str, action: str, status: ConnectorStatus = ConnectorStatus.ACTIVE
) -> Scenario:
    def scenario(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
        connector = make_connector(db, org, status=status)
        key = scoped_key(db, org, Scope.CONNECTIONS_WRITE)
        body = {"intervalDays": 30} if method == "PATCH" else None
        response = call(client, method, f"{BASE}/{connector.id}{path}", key, body)
        assert response.status_code in (200, 202, 204, 422), (response.status_code, response.get_json())
        return action

    return scenario


def _create(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    response = call(client, "POST", BASE, scoped_key(db, org, Scope.CONNECTIONS_WRITE), SETTINGS)
    assert response.status_code == 201, response.get_json()
    return Action.CONNECTION_CREATED


def _cancel_rotation(app: Flask, client: FlaskClient, db: Session, org: Organization) -> str:
    connector = make_connector(db, org)
    key = scoped_key(db, org, Scope.CONNECTIONS_WRITE)
    assert call(client, "POST", f"{BASE}/{connector.id}/rotation", key).status_code == 200
    assert call(client, "DELETE", f"{BASE}/{connector.id}/rotation", key).status_code == 200
    return Action.ROTATION_CANCELLED


API_SCENARIOS: dict[str, Scenario] = {
    "connections_api.create_connection": _create,
    "connections_api.change_connection": _on_connection("PATCH", "", Action.CONNECTION_EDITED),
    "connections_api.delete_connection": _on_connection("DELETE", "", Action.CONNECTION_DELETED),
    "connections_api.activate_connection": _on_connection("POST", "/activate", "connection.save"),
    "connections_api.export_now": _on_connection("POST", "/exports", Action.CONNECTION_EXPORT_REQUESTED),
    "connections_api.pause_connection": _on_connection("POST", "/pause", Action.CONNECTION_PAUSED),
    "connections_api.start_rotation": _on_connection("POST", "/rotation", Action.ROTATION_STARTED),
    "connections_api.cancel_rotation": _cancel_rotation,
    "connections_api.resume_connection": _on_connection(
        "POST", "/resume", Action.CONNECTION_RESUMED, ConnectorStatus.PAUSED
    ),
}
