"""The merge's statements run on the session's psycopg connection (lineage_core/infra/driver_sql.py)
behave as through SQLAlchemy where the product relies on it: in the session's transaction, errors as
SQLAlchemy's exceptions, a lost connection invalidated, statements seen by the engine's listeners."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from lineage_core.infra import driver_sql
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine
from lineage_core.infra.models import Organization

INSERT_ORG = text(
    "INSERT INTO organizations (slug, name, created_at) VALUES (:slug, :name, now()) RETURNING id, slug"
)
ORG_SLUGS = text("SELECT slug FROM organizations WHERE slug LIKE :like ORDER BY slug")


def test_rows_come_back_as_named_tuples_in_the_sessions_transaction(settings: Settings) -> None:
    with Session(get_engine(settings.database_url)) as session:
        (row,) = driver_sql.run(session, INSERT_ORG, {"slug": "initech", "name": "Initech"})
        assert row.slug == "initech" and isinstance(row.id, int)
        # Seen by the session's own statements: one transaction.
        count = text("SELECT count(*) FROM organizations WHERE slug = 'initech'")
        assert session.execute(count).scalar() == 1
        session.rollback()
        assert driver_sql.run(session, ORG_SLUGS, {"like": "initech%"}) == []
        # A savepoint of the session undoes what ran inside it, and only that.
        driver_sql.run(session, INSERT_ORG, {"slug": "initech-a", "name": "A"})
        savepoint = session.begin_nested()
        driver_sql.run(session, INSERT_ORG, {"slug": "initech-b", "name": "B"})
        savepoint.rollback()
        assert [row.slug for row in driver_sql.run(session, ORG_SLUGS, {"like": "initech%"})] == ["initech-a"]
        session.rollback()


def test_a_refused_statement_raises_sqlalchemys_error_of_its_kind(
    settings: Settings, org: Organization
) -> None:
    with Session(get_engine(settings.database_url)) as session:
        with pytest.raises(IntegrityError) as raised:
            driver_sql.run(session, INSERT_ORG, {"slug": org.slug, "name": "again"})
        assert type(raised.value.orig).__name__ == "UniqueViolation"
        assert "INSERT INTO organizations" in str(raised.value.statement)
        session.rollback()
        assert driver_sql.run(session, ORG_SLUGS, {"like": org.slug}) != []  # usable again


def test_a_lost_connection_is_invalidated_and_not_handed_out_again(settings: Settings) -> None:
    engine = get_engine(settings.database_url)
    with Session(engine) as session:
        backend = session.execute(text("SELECT pg_backend_pid()")).scalar()
        with engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
            admin.commit()
        with pytest.raises(OperationalError) as raised:
            driver_sql.run(session, ORG_SLUGS, {"like": "%"})
        assert raised.value.connection_invalidated
        session.rollback()
        # The session's next transaction runs on a new connection.
        assert session.execute(text("SELECT pg_backend_pid()")).scalar() != backend


def test_the_engines_listeners_see_each_statement(settings: Settings) -> None:
    engine = get_engine(settings.database_url)
    seen: list[str] = []

    def statement(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        seen.append(sql)

    event.listen(engine, "before_cursor_execute", statement)
    try:
        with Session(engine) as session:
            driver_sql.run(session, ORG_SLUGS, {"like": "x%"})
            session.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", statement)
    assert seen == ["SELECT slug FROM organizations WHERE slug LIKE %(like)s ORDER BY slug"]


def test_every_error_is_a_dbapi_error(settings: Settings) -> None:
    with Session(get_engine(settings.database_url)) as session:
        with pytest.raises(DBAPIError):
            driver_sql.run(session, text("SELECT CAST(:v AS integer)"), {"v": "not a number"})
        session.rollback()
