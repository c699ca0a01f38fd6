"""Security headers on every page of every blueprint (a new blueprint must add its page here)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Role
from portal import create_app
from portal.headers import CONTENT_SECURITY_POLICY, CSP_EXEMPT_BLUEPRINTS
from tests.factories import make_user
from tests.web import login

# blueprint -> (who signs in, a page of it)
PAGES = {
    "auth": (None, "/login"),
    "integrations": ("admin@acme.test", "/integrations/"),
    "api_keys": ("admin@acme.test", "/api-keys/"),
    "audit": ("admin@acme.test", "/audit/"),
    "ops": ("ops@vendor.test", "/ops/"),
    "ops_health": (None, "/healthz"),
    "api": (None, "/api/v1/lineage"),  # a 405 for GET, still with the headers
    "connections_api": (None, "/api/v1/connections"),  # a 401 without a key, still with the headers
    "api_docs": (None, "/api/v1/openapi.json"),
    "rq_dashboard": ("ops@vendor.test", "/admin/rq/"),
    None: (None, "/static/style.css"),
}


def test_every_blueprint_has_a_page_here(app: Flask) -> None:
    assert set(app.blueprints) | {None} == set(PAGES)


def _get(client: FlaskClient, db: Session, who: str | None, url: str) -> object:
    if who == "ops@vendor.test":
        make_user(db, None, who, Role.OPERATOR)
    if who:
        login(client, who)
    return client.get(url)


@pytest.mark.parametrize("blueprint", list(PAGES), ids=[str(b) for b in PAGES])
def test_security_headers_on_every_blueprint(
    blueprint: str | None, client: FlaskClient, db: Session, admin: object
) -> None:
    who, url = PAGES[blueprint]
    response = _get(client, db, who, url)
    headers = response.headers  # type: ignore[attr-defined]
    assert response.status_code < 500  # type: ignore[attr-defined]
    response.close()  # type: ignore[attr-defined]  # a static file's response holds the file open
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["Strict-Transport-Security"].startswith("max-age=31536000")
    if blueprint in CSP_EXEMPT_BLUEPRINTS:
        return
    csp = headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == "'self'"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'" and directives["base-uri"] == "'none'"


def test_no_hsts_in_local_mode(settings: Settings) -> None:
    app = create_app(test_config={"TESTING": True}, settings=replace(settings, local_mode=True))
    assert "Strict-Transport-Security" not in app.test_client().get("/login").headers


def test_pages_carry_no_inline_script_or_style(admin_client: FlaskClient) -> None:
    for url in ("/login", "/integrations/", "/api-keys/", "/audit/", "/integrations/openlineage"):
        page = admin_client.get(url).get_data(as_text=True)
        assert "<script>" not in page and " style=" not in page and " onclick=" not in page, url


def test_a_header_the_response_sets_itself_is_kept_whatever_its_case(app: Flask) -> None:
    """The defaults fill in what a response lacks; one it sets (in any case) is neither replaced nor
    doubled."""
    from flask import Response

    from portal.headers import _add_headers

    with app.test_request_context("/login"):
        response = _add_headers(Response("x", headers={"x-frame-options": "SAMEORIGIN"}))
    assert response.headers.getlist("X-Frame-Options") == ["SAMEORIGIN"]
    assert response.headers.getlist("X-Content-Type-Options") == ["nosniff"]
    assert response.headers.getlist("Content-Security-Policy") == [CONTENT_SECURITY_POLICY]
