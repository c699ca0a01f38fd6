"""The baseline the ingest benchmark compares against: "raw append".

The cheapest durable way to accept an OpenLineage event on this stack: parse the JSON (orjson) and INSERT
the whole event as one jsonb row, one transaction per event, no validation, no auth, no merge. Served by
the same gunicorn and posted to by the same client as the real API, and run as the same kind of
line-by-line import, so the difference to the real numbers is the cost of checking and merging.

- ``bench.baseline:app`` is the WSGI app (needs ``BASELINE_DATABASE_URL``).
- ``python -m bench.baseline FILE DATABASE_URL`` imports a file line by line.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb

CREATE = "CREATE TABLE IF NOT EXISTS bench_raw_events (id bigserial PRIMARY KEY, event jsonb NOT NULL)"
INSERT = "INSERT INTO bench_raw_events (event) VALUES (%s)"

_local = threading.local()


def _connection() -> psycopg.Connection[Any]:
    # One connection per gunicorn thread, like the product's pool gives one per concurrent request.
    connection = getattr(_local, "connection", None)
    if connection is None:
        connection = psycopg.connect(_plain_url(os.environ["BASELINE_DATABASE_URL"]))
        _local.connection = connection
    return connection


def _plain_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["REQUEST_METHOD"] != "POST":  # the benchmark's "is it up yet" probe
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    connection = _connection()
    with connection.transaction():
        connection.execute(INSERT, (Jsonb(orjson.loads(body)),))
    start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


def import_file(path: str, database_url: str) -> int:
    count = 0
    with psycopg.connect(_plain_url(database_url)) as connection, open(path, "rb") as lines:
        connection.execute(CREATE)
        connection.commit()
        for line in lines:
            if line.strip():
                with connection.transaction():
                    connection.execute(INSERT, (Jsonb(orjson.loads(line)),))
                count += 1
    return count


if __name__ == "__main__":
    print(import_file(sys.argv[1], sys.argv[2]))
