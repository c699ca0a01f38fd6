"""The OpenAPI 3.1 document is valid, names exactly the app's /api/v1 routes, and the running app answers
every operation as it says (schemathesis over the WSGI app, real PostgreSQL, Redis and moto)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from openapi_spec_validator import validate
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import Scope, create_api_key
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import ConnectorStatus
from portal import create_app
from portal.api.openapi import openapi_document
from tests.factories import make_connector, make_org
from tests.services import empty_all_tables, flush_redis_except_claim

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
_BUCKETS = itertools.count()


def _openapi_path(rule: str) -> str:
    """A Flask rule as OpenAPI writes it: ``/x/<int:connector_id>`` is ``/x/{connector_id}``."""
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def test_the_document_is_valid_openapi_3_1() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_every_api_route_is_documented_and_nothing_else(app: Flask) -> None:
    served = {
        (_openapi_path(rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/api/v1")
        for method in (rule.methods or set()) & METHODS
    }
    documented = {
        (path, method)
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method in {m.lower() for m in METHODS}
    }
    assert served == documented


def test_every_operation_names_its_scope_and_its_errors() -> None:
    for path, item in openapi_document()["paths"].items():
        for method, operation in item.items():
            if path == "/api/v1/openapi.json":
                assert operation["security"] == []
                continue
            (requirement,) = operation["security"]
            assert set(requirement["apiKey"]) <= {str(scope) for scope in Scope}, (path, method)
            assert {"401", "403", "429", "503"} <= set(operation["responses"]), (path, method)


def test_the_document_is_served_without_a_key(client: FlaskClient) -> None:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.get_json() == openapi_document()


# The running app against the document -----------------------------------------------------------------


@pytest.fixture(scope="module")
def api_app(base_settings: Settings) -> Iterator[Flask]:
    # Generous bad-key limits: schemathesis sends many requests without a key on purpose.
    config = {"TESTING": True, "API_KEY_LIMIT_PER_ADDRESS": "100000 per minute"}
    yield create_app(test_config=config, settings=base_settings)
    empty_all_tables(base_settings.database_url)
    flush_redis_except_claim(base_settings.redis_url)


@pytest.fixture(scope="module")
def api_caller(api_app: Flask, base_settings: Settings) -> dict[str, Any]:
    """A key of every scope, and an organization to make connections in."""
    db = session_factory(base_settings.database_url)()
    org = make_org(db, "schemathesis")
    key = create_api_key(db, org.id, "every-scope", list(Scope)).secret
    db.commit()
    return {"db": db, "org": org, "key": key}


@pytest.fixture(scope="module")
def api_schema(api_app: Flask, api_caller: dict[str, Any]) -> Any:
    return schemathesis.openapi.from_wsgi("/api/v1/openapi.json", api_app)


schema = schemathesis.pytest.from_fixture("api_schema")


def _fresh_connection(db: Session, org: Any) -> int:
    """A draft with its settings, so that downloads and the write check have something to work on."""
    connector = make_connector(
        db,
        org,
        status=ConnectorStatus.DRAFT,
        bucket=f"schemathesis-{next(_BUCKETS)}",
        account_id="123456789012",
        role_name="SchemathesisRole",
    )
    return connector.id


@schema.parametrize()
@hypothesis_settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_every_operation_answers_as_documented(case: Any, api_caller: dict[str, Any], aws: str) -> None:
    # Most cases hit a real connection of the key's organization, the others a random id (a 404);
    # schemathesis also sends ids that are not numbers at all, which must be 404s too.
    wanted = (case.path_parameters or {}).get("connector_id")
    if isinstance(wanted, int) and wanted % 3 != 0:
        case.path_parameters["connector_id"] = _fresh_connection(api_caller["db"], api_caller["org"])
    # The key replaces whatever credential schemathesis made up; the tests of test_connections_api.py
    # cover the answers to missing and wrong keys.
    # X-Organization is the key's own: a made-up slug is a 403, covered there too.
    headers = {"Authorization": f"Bearer {api_caller['key']}", "X-Organization": "schemathesis"}
    case.call_and_validate(
        headers=headers,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
        ],
    )
