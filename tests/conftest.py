"""Fixtures shared by the whole suite: real PostgreSQL, Redis and a moto server over HTTP."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient
from moto.server import ThreadedMotoServer
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from lineage_core.accounts import users as accounts
from lineage_core.accounts.organizations import create_organization
from lineage_core.accounts.users import create_user
from lineage_core.infra import migrate
from lineage_core.infra.config import Settings
from lineage_core.infra.db import Base, get_engine, session_factory
from lineage_core.infra.models import Organization, Role, User
from portal import create_app
from tests.services import flush_redis_except_claim, free_port, private_redis_db, throwaway_postgres_database

# Fixtures that live beside the helpers of one area, available to every test.
pytest_plugins = ["tests.export_helpers"]

VENDOR_ACCOUNT_ID = "123456789012"  # moto's default account: our side of the trust
PASSWORD = "correct horse battery staple"

# boto3 in the tests and in the processes they start must never reach real AWS.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
)
os.environ.pop("AWS_PROFILE", None)

# Password hashing strength is not what these tests are about; scrypt costs ~0.2 s a hash.
accounts.PASSWORD_HASH_METHOD = "pbkdf2:sha256:1000"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto server on its own port, for the whole run."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ["TEST_MOTO_ENDPOINT"] = endpoint
    yield endpoint
    server.stop()


@pytest.fixture
def aws(moto_endpoint: str) -> Iterator[str]:
    """A moto server emptied for this test, with IAM enforcement off. Yields its endpoint URL."""
    requests.post(f"{moto_endpoint}/moto-api/reset", timeout=10)
    yield moto_endpoint
    requests.post(f"{moto_endpoint}/moto-api/reset-auth", data=b"inf", timeout=10)
    requests.post(f"{moto_endpoint}/moto-api/reset", timeout=10)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with throwaway_postgres_database() as url:
        migrate.upgrade(url)
        yield url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with private_redis_db() as url:
        yield url


@pytest.fixture(scope="session")
def base_settings(postgres_url: str, redis_url: str, moto_endpoint: str) -> Settings:
    return Settings(
        database_url=postgres_url,
        redis_url=redis_url,
        secret_key="test-secret-key-not-for-production",
        vendor_account_id=VENDOR_ACCOUNT_ID,
        aws_endpoint_url=moto_endpoint,
        aws_region="us-east-1",
        # moto lets any role be assumed without an External ID; the check has its own Stubber tests.
        require_external_id_enforcement=False,
        export_queue="exports",
        local_mode=False,
    )


@pytest.fixture
def settings(base_settings: Settings) -> Iterator[Settings]:
    """Settings for one test; its database tables and Redis DB are emptied afterwards."""
    yield base_settings
    _empty_all_tables(base_settings.database_url)
    flush_redis_except_claim(base_settings.redis_url)


def _empty_all_tables(database_url: str) -> None:
    engine = get_engine(database_url)
    existing = set(inspect(engine).get_table_names()) - {"alembic_version"}
    tables = [table for table in Base.metadata.sorted_tables if table.name in existing]
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            names = ", ".join(f'"{table.name}"' for table in tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in reversed(tables):
                conn.execute(table.delete())


@pytest.fixture
def sqlite_settings(base_settings: Settings, tmp_path: Any) -> Settings:
    url = f"sqlite:///{tmp_path}/portal.db"
    migrate.upgrade(url)
    return replace(base_settings, database_url=url)


@pytest.fixture
def db(settings: Settings) -> Iterator[Session]:
    session = session_factory(settings.database_url)()
    yield session
    session.close()


@pytest.fixture
def app(settings: Settings) -> Flask:
    return create_app(test_config={"TESTING": True}, settings=settings)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def org(db: Session) -> Organization:
    organization = create_organization(db, "acme", "Acme Corp")
    db.commit()
    return organization


@pytest.fixture
def admin(db: Session, org: Organization) -> User:
    user = create_user(db, "admin@acme.test", PASSWORD, Role.ORG_ADMIN, org)
    db.commit()
    return user


@pytest.fixture
def operator(db: Session) -> User:
    user = create_user(db, "ops@vendor.test", PASSWORD, Role.OPERATOR, None)
    db.commit()
    return user


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


@pytest.fixture
def admin_client(client: FlaskClient, admin: User) -> FlaskClient:
    login(client, admin.email)
    return client


def s3_client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
