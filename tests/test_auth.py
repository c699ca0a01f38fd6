"""Every page needs a login, every form a CSRF token, and roles keep to their pages."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, User
from tests.web import PASSWORD, csrf_token_from, login

# Endpoints that are reachable without a session, and why.
PUBLIC = {
    "auth.login": "the sign-in form",
    "static": "stylesheets",
    "ops_health.healthz": "load balancers; answers only ok/unreachable per dependency",
    "ops_health.metrics": "Prometheus; checks a bearer token or an operator session itself",
    "api_docs.openapi_json": "the API's OpenAPI document: what every client may read before it has a key",
}


def _concrete_url(rule: str) -> str:
    return re.sub(r"<(?:int:)?[a-z_]+>", "1", re.sub(r"<path:[a-z_]+>", "x", rule))


def _protected_rules(app: Flask) -> list[tuple[str, str, str]]:
    rules = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint in PUBLIC or getattr(app.view_functions[rule.endpoint], "_public", False):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            rules.append((rule.endpoint, method, _concrete_url(rule.rule)))
    return rules


def test_every_route_but_the_public_ones_redirects_to_login(app: Flask, client: FlaskClient) -> None:
    app.config["WTF_CSRF_ENABLED"] = False  # so a POST reaches the login check, not the CSRF one
    rules = _protected_rules(app)
    assert len(rules) >= 10
    for endpoint, method, url in rules:
        response = client.open(url, method=method)
        assert response.status_code == 302, (endpoint, method, url, response.status_code)
        assert response.headers["Location"].startswith("/login"), (endpoint, url)


def test_public_endpoints_are_only_the_listed_ones(app: Flask) -> None:
    public = {
        rule.endpoint
        for rule in app.url_map.iter_rules()
        if rule.endpoint in PUBLIC or getattr(app.view_functions[rule.endpoint], "_public", False)
    }
    # Bearer-key API endpoints (ingest, connections) authenticate themselves (401 without a key: their
    # own tests); anything else public must be listed above.
    assert {e for e in public if not e.startswith(("api.", "connections_api."))} <= set(PUBLIC)


def test_login_with_a_wrong_password_is_refused(client: FlaskClient, admin: User) -> None:
    page = client.get("/login").get_data(as_text=True)
    response = client.post(
        "/login",
        data={"email": admin.email, "password": "wrong password!", "csrf_token": csrf_token_from(page)},
    )
    assert response.status_code == 200
    assert "The e-mail or password is not correct." in response.get_data(as_text=True)
    assert client.get("/integrations/").status_code == 302


def test_login_then_logout(client: FlaskClient, admin: User) -> None:
    login(client, admin.email)
    page = client.get("/integrations/")
    assert page.status_code == 200
    client.post("/logout", data={"csrf_token": csrf_token_from(page.get_data(as_text=True))})
    assert client.get("/integrations/").status_code == 302


def test_login_never_redirects_off_site(client: FlaskClient, admin: User) -> None:
    page = client.get("/login").get_data(as_text=True)
    response = client.post(
        "/login?next=//evil.example/x",
        data={"email": admin.email, "password": PASSWORD, "csrf_token": csrf_token_from(page)},
    )
    assert response.headers["Location"] == "/integrations/"


def test_a_post_without_csrf_token_is_refused(admin_client: FlaskClient, db: Session) -> None:
    response = admin_client.post("/integrations/openlineage/new", data={})
    assert response.status_code == 400
    assert db.scalars(select(Connector)).all() == []


def test_login_form_needs_csrf_too(client: FlaskClient, admin: User) -> None:
    response = client.post("/login", data={"email": admin.email, "password": PASSWORD})
    assert response.status_code == 400


def test_operators_cannot_open_org_admin_pages(client: FlaskClient, operator: User) -> None:
    login(client, operator.email)
    assert client.get("/").headers["Location"] == "/ops/"
    assert client.get("/ops/").status_code == 200
    assert client.get("/integrations/").status_code == 403
    assert client.get("/integrations/openlineage").status_code == 403


def test_org_admins_cannot_open_operator_pages(admin_client: FlaskClient) -> None:
    assert admin_client.get("/ops/").status_code == 403


@pytest.mark.parametrize("header", ["X-Frame-Options", "Content-Security-Policy", "X-Content-Type-Options"])
def test_security_headers(client: FlaskClient, header: str) -> None:
    assert header in client.get("/login").headers
