"""The portal through Flask's test client: the test PASSWORD, signing in, CSRF-protected forms, and the
setup wizard's steps ("Start Setup", "Set Up New Connection", Save).
"""

from __future__ import annotations

import re
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector

PASSWORD = "correct horse battery staple"

_CSRF_INPUT = re.compile(r'<input[^>]*name="csrf_token"[^>]*value="([^"]+)"')


def csrf_token_from(html: str) -> str:
    match = _CSRF_INPUT.search(html)
    assert match, "page has no CSRF token"
    return match.group(1)


def login(client: FlaskClient, email: str, password: str = PASSWORD) -> None:
    page = client.get("/login")
    response = client.post(
        "/login",
        data={
            "email": email,
            "password": password,
            "csrf_token": csrf_token_from(page.get_data(as_text=True)),
        },
    )
    assert response.status_code == 302, response.get_data(as_text=True)


def post_form(client: FlaskClient, page_url: str, post_url: str | None, data: dict[str, Any]) -> Any:
    """GET ``page_url`` for its CSRF token, then POST ``data`` with it to ``post_url`` (default: same)."""
    page = client.get(page_url)
    assert page.status_code == 200, (page_url, page.status_code)
    return client.post(
        post_url or page_url, data={**data, "csrf_token": csrf_token_from(page.get_data(as_text=True))}
    )


# The setup wizard --------------------------------------------------------------------------------------

CUSTOMER_ACCOUNT = "123456789012"  # moto's account; the template's Rule compares it with AWS::AccountId
FORM = {
    "bucket": "acme-lineage",
    "prefix": "foundational/openlineage",
    "account_id": CUSTOMER_ACCOUNT,
    "role_name": "FoundationalOpenLineageExport",
    "interval_days": "14",
    "kms_key_arn": "",
    "role_path": "/",
    "permissions_boundary_arn": "",
}


def start_and_fill(client: FlaskClient, db: Session, **overrides: str) -> Connector:
    """Integrations → Add Account → Start Setup → fill "Set Up New Connection" → Next."""
    response = post_form(client, "/integrations/openlineage/new", None, {})
    assert response.status_code == 302, response.status_code
    setup_url = response.headers["Location"]
    response = post_form(client, setup_url, None, {**FORM, **overrides})
    assert response.status_code == 302, response.get_data(as_text=True)[-2000:]
    connector_id = int(setup_url.rstrip("/").split("/")[-2])
    db.expire_all()
    connector = db.scalars(select(Connector).where(Connector.id == connector_id)).one()
    return connector


def save(client: FlaskClient, connector_id: int) -> Any:
    deploy_url = f"/integrations/openlineage/{connector_id}/deploy"
    return post_form(client, deploy_url, f"/integrations/openlineage/{connector_id}/save", {})


def save_failing(client: FlaskClient, connector_id: int) -> str:
    """Save, expecting the write check to fail: the POST redirects back to the connection's page (not
    the POST URL), which shows the error. Returns that page's HTML."""
    response = save(client, connector_id)
    assert response.status_code == 302, response.status_code
    assert response.headers["Location"] == f"/integrations/openlineage/{connector_id}/deploy#connect"
    page = client.get(response.headers["Location"])
    assert page.status_code == 200
    return str(page.get_data(as_text=True))
