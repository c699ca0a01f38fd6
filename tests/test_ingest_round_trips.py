"""What one request to the single-event endpoint costs the database: one connection, one transaction,
no ROLLBACK (psycopg forgets its prepared statements at each one), a handful of statements."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine
from lineage_core.infra.models import Organization
from tests.factories import dataset, make_key, run_event, schema
from tests.key_cache import listening_key_cache

URL = "/api/v1/lineage"


@pytest.fixture
def database_calls(settings: Settings) -> Iterator[Counter[str]]:
    """Counts, on the app's engine, statements, commits, rollbacks, pool checkouts and connections used."""
    engine = get_engine(settings.database_url)
    calls: Counter[str] = Counter()
    used: dict[int, Any] = {}

    def statement(*_args: Any) -> None:
        calls["statements"] += 1

    def commit(_conn: Any) -> None:
        calls["commits"] += 1

    def rollback(_conn: Any) -> None:
        calls["rollbacks"] += 1

    def checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        calls["checkouts"] += 1
        used[id(dbapi_connection)] = dbapi_connection

    listeners = [
        (engine, "before_cursor_execute", statement),
        (engine, "commit", commit),
        (engine, "rollback", rollback),
        (engine.pool, "checkout", checkout),
    ]
    for target, name, listener in listeners:
        event.listen(target, name, listener)
    calls.used = used  # type: ignore[attr-defined]
    yield calls
    for target, name, listener in listeners:
        event.remove(target, name, listener)


def rerun(day: int) -> dict[str, Any]:
    inputs = [dataset(f"raw.t{i}", schema=schema(("id", "INT"), ("v", "TEXT"))) for i in range(3)]
    return run_event(
        job="daily", time=f"2024-05-{day:02d}T00:00:00Z", inputs=inputs, outputs=[dataset("mart")]
    )


def test_a_request_is_one_connection_one_transaction_and_no_rollback(
    client: FlaskClient, db: Session, org: Organization, settings: Settings, database_calls: Counter[str]
) -> None:
    key = make_key(db, org)
    headers = {"Authorization": f"Bearer {key}"}
    assert client.post(URL, json=rerun(1), headers=headers).status_code == 201
    # A pool holding several idle connections (as after any burst of concurrent requests) still serves
    # one client's requests on one warm connection: the pool hands out the connection returned last.
    engine = get_engine(settings.database_url)
    spare, other = engine.connect(), engine.connect()
    spare.close()
    other.close()
    assert client.post(URL, json=rerun(1), headers=headers).status_code == 201
    # The key cache listening (see test_key_cache.py for what it does when it is not): the next request
    # looks the key up and keeps it, the others find it in memory.
    listening_key_cache(settings.database_url)
    assert client.post(URL, json=rerun(1), headers=headers).status_code == 201
    database_calls.clear()
    database_calls.used.clear()  # type: ignore[attr-defined]

    requests = 10
    for day in range(2, 2 + requests):
        response = client.post(URL, json=rerun(day), headers=headers)
        assert response.get_json()["lineage"] == "refreshed"
    assert database_calls["rollbacks"] == 0
    assert database_calls["commits"] == requests
    assert database_calls["checkouts"] == requests
    # SET LOCAL, lock the job, read and lock the datasets, update both: the key is known.
    assert database_calls["statements"] == 6 * requests

    # A request refused after its key is known takes no connection at all.
    database_calls.clear()
    response = client.post(URL, data=b"{", headers={**headers, "Content-Type": "application/json"})
    assert response.status_code == 400
    assert (database_calls["checkouts"], database_calls["statements"]) == (0, 0)

    # One whose key is looked up (an unknown key) commits its read instead of rolling it back.
    new_key = make_key(db, org)
    database_calls.clear()
    response = client.post(URL, data=b"{", headers={"Authorization": f"Bearer {new_key}"})
    assert response.status_code == 400
    assert database_calls["rollbacks"] == 0
    assert database_calls["commits"] == 1

    # So the connection kept the merge's prepared statements (psycopg prepares a statement on its
    # fifth use): had a ROLLBACK come after the key's lookup, it would have sent DEALLOCATE ALL.
    connections = list(database_calls.used.values())  # type: ignore[attr-defined]
    assert len(connections) == 1
    (connection,) = connections
    prepared = connection.execute(text("SELECT count(*) FROM pg_prepared_statements").text).fetchone()[0]
    connection.commit()
    assert prepared >= 6  # the six statements above
