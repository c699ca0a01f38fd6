"""The embedded default: the same migrations and the wizard on a SQLite file."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError

from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine, session_scope
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RunStatus
from lineage_core.setup.role_spec import RoleSpec
from portal import create_app
from tests.factories import (
    create_bucket,
    create_role_through_iam,
    make_connector,
    make_org,
    make_run,
    make_user,
)
from tests.services import VENDOR_ACCOUNT_ID
from tests.web import login, save, start_and_fill


def test_migrations_create_every_table_on_sqlite(sqlite_settings: Settings) -> None:
    names = set(inspect(get_engine(sqlite_settings.database_url)).get_table_names())
    assert {"organizations", "users", "connectors", "export_runs", "api_keys", "alembic_version"} <= names


def test_wizard_and_save_on_sqlite(sqlite_settings: Settings, aws: str) -> None:
    with session_scope(sqlite_settings.database_url) as session:
        make_user(session, make_org(session, "acme"), "admin@acme.test")
    client: FlaskClient = create_app(test_config={"TESTING": True}, settings=sqlite_settings).test_client()
    login(client, "admin@acme.test")
    create_bucket(aws)
    with session_scope(sqlite_settings.database_url) as session:
        connector = start_and_fill(client, session)
        create_role_through_iam(aws, RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID))
        assert save(client, connector.id).status_code == 302
    with session_scope(sqlite_settings.database_url) as session:
        stored = session.scalars(select(Connector)).one()
        assert stored.status is ConnectorStatus.ACTIVE
        assert stored.verified_at is not None and stored.verified_at.tzinfo is not None
        run = session.scalars(select(ExportRun)).one()
        assert run.status is RunStatus.QUEUED


def test_one_in_flight_run_per_connector_is_enforced_by_sqlite_too(sqlite_settings: Settings) -> None:
    with session_scope(sqlite_settings.database_url) as session:
        org = make_org(session, "acme")
        # Finished runs are not limited.
        connector = make_connector(
            session, org, status=ConnectorStatus.DRAFT, runs=[RunStatus.QUEUED, RunStatus.SUCCEEDED]
        )
        connector_id = connector.id
    with pytest.raises(IntegrityError), session_scope(sqlite_settings.database_url) as session:
        make_run(session, session.get_one(Connector, connector_id), RunStatus.RUNNING)
