"""Revoking an API key asks first, saying what stops working and that it cannot be undone."""

from __future__ import annotations

from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import list_api_keys
from lineage_core.infra.models import Organization
from tests.factories import make_key, make_org
from tests.web import csrf_token_from


def test_revoke_asks_first_and_says_what_stops(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    make_key(db, org, "dbt-prod")
    key = list_api_keys(db, org.id)[0]
    index = admin_client.get("/api-keys/").get_data(as_text=True)
    assert f'action="/api-keys/{key.id}/revoke"' not in index  # no one-click revoke
    assert f'href="/api-keys/{key.id}/revoke"' in index

    page = admin_client.get(f"/api-keys/{key.id}/revoke")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "Revoke key dbt-prod?" in html and "cannot be undone" in html
    db.expire_all()
    assert list_api_keys(db, org.id)[0].revoked_at is None  # asking revoked nothing

    response = admin_client.post(f"/api-keys/{key.id}/revoke", data={"csrf_token": csrf_token_from(html)})
    assert response.status_code == 302
    db.expire_all()
    assert list_api_keys(db, org.id)[0].revoked_at is not None
    assert admin_client.get(f"/api-keys/{key.id}/revoke").status_code == 404  # nothing left to revoke


def test_revoke_confirmation_of_another_organizations_key_is_a_404(
    admin_client: FlaskClient, db: Session
) -> None:
    other = make_org(db, "globex")
    make_key(db, other)
    key = list_api_keys(db, other.id)[0]
    assert admin_client.get(f"/api-keys/{key.id}/revoke").status_code == 404
