"""Fixtures shared by the whole suite: real PostgreSQL, Redis and a moto server over HTTP, the app and its
client, the usual rows, and Terraform working directories.

Only fixtures live here; the helpers they use are in tests/services.py, tests/factories.py, tests/web.py
and tests/terraform.py, which tests import directly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient
from moto.server import ThreadedMotoServer
from sqlalchemy.orm import Session

from lineage_core.accounts import key_cache
from lineage_core.accounts import users as accounts
from lineage_core.infra import migrate
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Organization, Role, User
from portal import create_app
from tests.factories import BUCKET, make_org, make_user
from tests.processes import kill, leftover_processes, mark_this_run
from tests.services import (
    VENDOR_ACCOUNT_ID,
    empty_all_tables,
    flush_redis_except_claim,
    free_port,
    private_redis_db,
    s3_client,
    throwaway_postgres_database,
)
from tests.terraform import POLICIES_DIR, Workdir, copy_tree, require_terraform
from tests.web import login

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
    empty_all_tables(base_settings.database_url)
    key_cache.clear_all()  # the keys it held are gone with the tables
    flush_redis_except_claim(base_settings.redis_url)


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
    return make_org(db, "acme", "Acme Corp")


@pytest.fixture
def admin(db: Session, org: Organization) -> User:
    return make_user(db, org, "admin@acme.test")


@pytest.fixture
def operator(db: Session) -> User:
    return make_user(db, None, "ops@vendor.test", Role.OPERATOR)


@pytest.fixture
def admin_client(client: FlaskClient, admin: User) -> FlaskClient:
    login(client, admin.email)
    return client


@pytest.fixture
def s3(aws: str) -> Any:
    """An S3 client on the emptied moto server, with the connectors' default bucket created."""
    client = s3_client(aws)
    client.create_bucket(Bucket=BUCKET)
    return client


# Terraform: one initialised directory of the policies submodule for the whole run -----------------------


@pytest.fixture(scope="session")
def terraform_bin() -> str:
    return require_terraform()


@pytest.fixture(scope="session")
def policies_workdir(terraform_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Workdir:
    """The policies submodule, copied and initialised once; each case applies with its own state file."""
    workdir = Workdir(copy_tree(POLICIES_DIR, tmp_path_factory.mktemp("policies")), terraform_bin)
    workdir.init()
    return workdir


# -- processes the run started ------------------------------------------------------------------------
_RUN_ID = mark_this_run()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process it started outlives it (after killing it): see tests/processes.py."""
    leftovers = leftover_processes(_RUN_ID)
    if leftovers:
        kill(leftovers)
        names = "; ".join(f"pid {p.pid}: {p.command[:200]}" for p in leftovers)
        session.config.get_terminal_writer().line(
            f"FAILED: {len(leftovers)} process(es) started by the tests were still running at the end "
            f"and were killed: {names}",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
