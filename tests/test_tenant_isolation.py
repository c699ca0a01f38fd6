"""One organization can neither see nor change another organization's connector, by any URL."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus
from tests.factories import make_org, make_user
from tests.web import csrf_token_from, login, start_and_fill


@pytest.fixture
def victim_connector(admin_client: FlaskClient, db: Session) -> Connector:
    return start_and_fill(admin_client, db)


@pytest.fixture
def intruder(app: Flask, db: Session) -> FlaskClient:
    make_user(db, make_org(db, "globex"), "admin@globex.test")
    client = app.test_client()
    login(client, "admin@globex.test")
    return client


def _connector_urls(app: Flask, connector_id: int) -> list[tuple[str, str]]:
    urls = []
    for rule in app.url_map.iter_rules():
        # The connections API authenticates by key, not session: tests/test_connections_api.py checks it.
        if "<int:connector_id>" not in rule.rule or rule.endpoint.startswith("connections_api."):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            urls.append((method, re.sub(r"<int:connector_id>", str(connector_id), rule.rule)))
    return urls


def test_every_connector_url_is_a_404_for_another_org(
    app: Flask, intruder: FlaskClient, victim_connector: Connector, db: Session
) -> None:
    token = csrf_token_from(intruder.get("/integrations/openlineage").get_data(as_text=True))
    urls = _connector_urls(app, victim_connector.id)
    assert len(urls) >= 7
    for method, url in urls:
        data = {"csrf_token": token, "bucket": "stolen", "account_id": "999999999999", "role_name": "x"}
        response = intruder.open(url, method=method, data=data if method == "POST" else None)
        assert response.status_code == 404, (method, url, response.status_code)
    db.expire_all()
    stored = db.get(Connector, victim_connector.id)
    assert stored is not None
    assert stored.bucket == "acme-lineage" and stored.status is ConnectorStatus.DRAFT


def test_another_orgs_connector_is_not_listed(intruder: FlaskClient, victim_connector: Connector) -> None:
    html = intruder.get("/integrations/openlineage").get_data(as_text=True)
    assert "acme-lineage" not in html
    assert victim_connector.external_id not in html
    assert "No accounts yet" in html
