"""Engine and sessions shared by the portal, the workers and the CLI.

One way to get a session per context, and one rule for who commits:

* **A web request** uses ``portal.database.get_db()``: one session per request, opened on first use
  and closed when the request ends. The *view* commits, once it has decided the request succeeded;
  whatever it did not commit is rolled back when the session closes.
* **A job** (worker) opens ``session_factory(url)()`` in a ``with`` block. Store functions in
  ``lineage_core`` never commit on a caller's behalf, except the steps that own a transaction by
  contract (an export run's claim and close, the tick's repairs, an ingested event), which say so in
  their docstrings and commit what they changed.
* **A CLI command or script** uses :func:`session_scope`: it commits when the block ends without an
  exception and rolls back otherwise.

Store functions take the ``Session`` as their first argument and only ``flush`` (to get ids).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, create_engine, event, exc
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

# A pooled connection idle for longer than this is pinged before use (see _ping_if_idle).
PING_AFTER_IDLE_SECONDS = 1.0


class Base(DeclarativeBase):
    """Declarative base of every table."""


@lru_cache(maxsize=8)
def get_engine(database_url: str) -> Engine:
    """One engine per URL per process (engines own connection pools)."""
    if database_url.startswith("sqlite"):
        engine = create_engine(database_url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # LIFO: a request gets the connection returned last, the one whose prepared statements are warm and
    # that skips the idle ping; with FIFO, requests would rotate over every pooled connection.
    engine = create_engine(database_url, pool_use_lifo=True)
    event.listen(engine, "checkin", _note_checkin)
    event.listen(engine, "checkout", lambda conn, record, _proxy: _ping_if_idle(engine, conn, record))
    return engine


def _note_checkin(_dbapi_connection: Any, record: Any) -> None:
    record.info["checked_in_at"] = time.monotonic()


def _ping_if_idle(engine: Engine, dbapi_connection: Any, record: Any) -> None:
    """Ping a connection that sat in the pool for a while; a dead one is replaced (the pool retries).

    SQLAlchemy's pool_pre_ping pings at every checkout: a round trip per request (and per transaction
    of a session that releases its connection at commit), measured as one of the ingest endpoint's
    extra statements. A connection returned less than a second ago was working then; one that waited
    longer (the database may have restarted meanwhile) is checked. A connection that broke within that
    second fails its request, which the pool then notices (it invalidates every older connection).
    """
    idle_since = record.info.get("checked_in_at")
    if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
        return
    try:
        engine.dialect.do_ping(dbapi_connection)
    except Exception as error:
        raise exc.DisconnectionError(f"pooled connection failed its ping: {error}") from error


def warm_engine(database_url: str) -> None:
    """Connect once, so the engine knows its database, then close the connection.

    For a process about to fork workers (the RQ worker forks once per job): each fork inherits an engine
    that is ready (dialect initialised, about 0.08 s saved per job) and no connection, since a
    connection must never be shared by two processes.
    """
    engine = get_engine(database_url)
    with engine.connect():
        pass
    engine.dispose()


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    # Foreign keys are off by default in SQLite; WAL lets the web process read while a worker writes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def session_factory(database_url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(database_url), expire_on_commit=False)


@contextmanager
def session_scope(database_url: str) -> Iterator[Session]:
    """A session that commits on success and rolls back on any exception."""
    session = session_factory(database_url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def rowcount(result: Any) -> int:
    """Rows an UPDATE or DELETE matched (``Session.execute`` is typed as returning a plain ``Result``)."""
    return cast(CursorResult[Any], result).rowcount
