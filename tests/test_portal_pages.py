"""Pages that look like the portal: errors, "API key created", Revoke asking first; /metrics' Content-Type."""

from __future__ import annotations

from dataclasses import replace

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Organization, Role
from portal import create_app
from tests.factories import make_connector, make_user
from tests.web import PASSWORD, csrf_token_from, login, post_form


def _is_portal_page(html: str) -> bool:
    return '<header class="topbar">' in html and '<link rel="stylesheet" href="/static/style.css">' in html


def test_404_is_a_portal_page_with_navigation(admin_client: FlaskClient) -> None:
    response = admin_client.get("/integrations/openlineage/999999/setup")
    assert response.status_code == 404
    html = response.get_data(as_text=True)
    assert _is_portal_page(html) and "Page not found" in html
    assert '<a href="/integrations/">Integrations</a>' in html and "Sign out" in html
    assert "The requested URL was not found on the server" not in html  # Werkzeug's page


def test_403_is_a_portal_page(client: FlaskClient, db: Session) -> None:
    make_user(db, None, "ops@vendor.test", Role.OPERATOR)
    login(client, "ops@vendor.test")
    response = client.get("/integrations/")
    assert response.status_code == 403
    html = response.get_data(as_text=True)
    assert _is_portal_page(html) and "You do not have access to this page" in html


def test_500_is_a_portal_page(settings: Settings, db: Session, org: Organization) -> None:
    make_user(db, org, "admin@acme.test")
    app: Flask = create_app(test_config={"TESTING": True, "PROPAGATE_EXCEPTIONS": False}, settings=settings)

    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("a bug")

    client = app.test_client()
    login(client, "admin@acme.test")
    response = client.get("/boom")
    assert response.status_code == 500
    html = response.get_data(as_text=True)
    assert _is_portal_page(html) and "Something went wrong on our side" in html
    assert "a bug" not in html


def test_api_errors_stay_json(client: FlaskClient) -> None:
    response = client.get("/api/v1/nothing-here")
    assert response.status_code == 404 and response.is_json


def test_api_key_created_is_an_html_page(admin_client: FlaskClient) -> None:
    response = post_form(admin_client, "/api-keys/", None, {"name": "airflow-prod"})
    assert response.status_code == 201
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-store"
    assert "<h1>API key created</h1>" in response.get_data(as_text=True)


def test_metrics_content_type_names_its_charset_once(
    settings: Settings, db: Session, org: Organization
) -> None:
    token = "scrape-token-0123456789"
    app = create_app(test_config={"TESTING": True}, settings=replace(settings, metrics_token=token))
    make_connector(db, org)
    response = app.test_client().get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    content_type = response.headers["Content-Type"]
    assert content_type.startswith("text/plain; version=")
    assert content_type.count("charset") == 1, content_type


def test_an_operator_lands_on_their_own_page_after_sign_in(client: FlaskClient, db: Session) -> None:
    make_user(db, None, "ops@vendor.test", Role.OPERATOR)
    page = client.get("/login")
    response = client.post(
        "/login",
        data={
            "email": "ops@vendor.test",
            "password": PASSWORD,
            "csrf_token": csrf_token_from(page.get_data(as_text=True)),
        },
        follow_redirects=True,
    )
    assert response.status_code == 200 and response.request.path == "/ops/"
