"""The merge's statements run on the session's psycopg connection (lineage_core/infra/driver_sql.py)
behave as through SQLAlchemy where the product relies on it: in the session's transaction, errors as
SQLAlchemy's exceptions, a lost connection invalidated, statements seen by the engine's listeners."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from lineage_core.infra import db as db_module
from lineage_core.infra import driver_sql
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine
from lineage_core.infra.models import Organization


def plain_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


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


def test_a_lost_connection_retires_every_older_pooled_one(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a database restart the first failure tells the pool: the other connections it held are
    not handed out (each would have failed a request of its own)."""
    monkeypatch.setattr(db_module, "PING_AFTER_IDLE_SECONDS", 3600.0)  # no idle ping to hide it
    engine = get_engine(settings.database_url)
    engine.dispose()  # the pool holds these two connections only
    first, second = engine.connect(), engine.connect()
    old = {connection.execute(text("SELECT pg_backend_pid()")).scalar() for connection in (first, second)}
    first.close()
    second.close()
    with psycopg.connect(plain_url(settings.database_url), autocommit=True) as admin:
        for pid in old:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with Session(engine) as session:
        with pytest.raises(OperationalError) as raised:
            driver_sql.run(session, ORG_SLUGS, {"like": "%"})
        assert raised.value.connection_invalidated
        session.rollback()
        assert session.execute(text("SELECT pg_backend_pid()")).scalar() not in old
        # While that one is in use, the pool's next connection is not the other old one either.
        with Session(engine) as other:
            assert other.execute(text("SELECT pg_backend_pid()")).scalar() not in old
        session.rollback()


def test_a_stop_in_the_middle_of_a_statement_retires_its_connection(settings: Settings) -> None:
    """A worker stopped mid-statement (KeyboardInterrupt, SystemExit): the connection's state is
    unknown, so it is not reused; the stop itself goes on up."""
    engine = get_engine(settings.database_url)

    def stop(*_args: Any) -> None:
        raise KeyboardInterrupt

    with Session(engine) as session:
        backend = session.execute(text("SELECT pg_backend_pid()")).scalar()
        event.listen(engine, "before_cursor_execute", stop)
        try:
            with pytest.raises(KeyboardInterrupt):
                driver_sql.run(session, ORG_SLUGS, {"like": "%"})
        finally:
            event.remove(engine, "before_cursor_execute", stop)
        session.rollback()
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
