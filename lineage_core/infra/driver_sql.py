"""Statements of the ingest's merge, run straight on the session's psycopg connection (PostgreSQL only).

Through SQLAlchemy, each statement cost about 0.05 ms of Python on top of psycopg's own (the cache key
of the compiled statement, the execution context, the result's metadata), and a single event's merge
makes six to eight of them: a quarter of its CPU in the web worker (measured, an event of a new job
stored alone: 1.52 ms through the session, 1.10 ms here). Here each statement's text is compiled once
(the statements are module constants), psycopg runs it in the session's transaction (so savepoints,
commit and rollback stay the session's), and rows come back as named tuples, read as SQLAlchemy's
rows are (``row.id``).

What SQLAlchemy does around a statement is kept where the product relies on it:

* a failure goes through SQLAlchemy's own handling (``Connection._handle_dbapi_exception``, what its
  ``execute`` calls): the SQLAlchemy exception of its kind (``IntegrityError``, ``OperationalError``...
  with psycopg's error as ``orig``), ``handle_error`` listeners, and for a lost connection the
  connection invalidated, and with it every older pooled one, as after a database restart (a stop in
  the middle of a statement, ``KeyboardInterrupt`` or ``SystemExit``, invalidates that connection only);
* the engine's ``before_cursor_execute`` listeners see each statement (tests count statements).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

import psycopg
from psycopg.pq import ExecStatus
from psycopg.rows import namedtuple_row
from sqlalchemy import Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import TextClause

_TUPLES_OK = ExecStatus.TUPLES_OK


@lru_cache(maxsize=256)
def _sql(statement: TextClause, dialect: Dialect) -> str:
    """The statement's text with psycopg's placeholders (``%(name)s``), as the engine writes it."""
    return str(statement.compile(dialect=dialect))


def run(session: Session, statement: TextClause, params: dict[str, Any]) -> list[Any]:
    """Execute ``statement`` in the session's transaction; its rows (named tuples), or [] if it returns
    none.

    Raises:
        sqlalchemy.exc.DBAPIError: the database refused the statement or was lost (the subclass says
            which); the caller rolls the session back.
        sqlalchemy.exc.StatementError: a Python error around the statement (a listener's, a row that
            cannot be built), the original as ``orig``.
    """
    connection = session.connection()
    raw = connection.connection.driver_connection
    assert raw is not None  # a live connection: session.connection() checked it out
    sql = _sql(statement, connection.dialect)
    cursor: psycopg.Cursor[Any] | None = None
    try:
        cursor = raw.cursor(row_factory=namedtuple_row)
        if connection.dispatch.before_cursor_execute:
            connection.dispatch.before_cursor_execute(connection, cursor, sql, params, None, False)
        cursor.execute(sql, params)
        # Rows only from a statement that returns some. Its status, not ``description``, which builds a
        # column object per column at each reading.
        result = cursor.pgresult
        rows = cursor.fetchall() if result is not None and result.status == _TUPLES_OK else []
        cursor.close()
        return rows
    except BaseException as error:
        # Raises the SQLAlchemy exception (see the module's text); a private method, whose behaviour
        # tests/test_driver_sql.py pins down.
        connection._handle_dbapi_exception(error, sql, params, cast(Any, cursor), None)
