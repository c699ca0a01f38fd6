"""The connections API through Flask's test client: keys with scopes, and calls that carry them."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import Scope, create_api_key
from lineage_core.infra.models import Organization
from tests.web import CUSTOMER_ACCOUNT, FORM

BASE = "/api/v1/connections"

# The wizard's FORM, as the API's settings (camelCase; optional ones left out).
SETTINGS = {
    "bucket": FORM["bucket"],
    "prefix": FORM["prefix"],
    "accountId": CUSTOMER_ACCOUNT,
    "roleName": FORM["role_name"],
    "intervalDays": 14,
}


def scoped_key(db: Session, org: Organization, *scopes: Scope, name: str = "automation") -> str:
    """A new key of ``org`` with ``scopes`` (connections:write when none are given); its secret."""
    key = create_api_key(db, org.id, name, scopes or (Scope.CONNECTIONS_WRITE,))
    db.commit()
    return key.secret


def call(client: FlaskClient, method: str, url: str, key: str | None, body: Any = None, **kwargs: Any) -> Any:
    """One API call with ``Authorization: Bearer <key>`` (none when ``key`` is None)."""
    headers = dict(kwargs.pop("headers", {}))
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if body is not None:
        kwargs["json"] = body
    return client.open(url, method=method, headers=headers, **kwargs)
