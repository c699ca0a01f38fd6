"""Planner statistics kept fresh during a benchmark, where the server's autovacuum is off.

A database that grows from empty during a run has no statistics unless something ANALYZEs it. With
none, PostgreSQL plans a job's lookup by (organization, namespace, name) through the smaller
(organization, updated_at) index and reads every row of the organization: each event then costs what
the organization's size costs, and 10,000 events cost 4x per event what 1,000 do (measured: 5 → 14 ms
of PostgreSQL CPU per event; with statistics, flat at 4-5 ms). Production servers run autovacuum
(PostgreSQL's and RDS's default), which analyzes a table once a tenth of it changed. Where this
machine's server has it off, a thread stands in for it: ANALYZE of the database every few seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

INTERVAL_SECONDS = 5.0


def _plain_url(database_url: str) -> str:
    return database_url.replace("postgresql+psycopg://", "postgresql://", 1)


@contextmanager
def fresh_statistics(database_url: str) -> Iterator[str]:
    """Yields how statistics are kept for the table's footnote."""
    url = _plain_url(database_url)
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SHOW autovacuum").fetchone()
    if row is not None and row[0] == "on":
        yield "the server's autovacuum"
        return
    stop = threading.Event()

    def analyze_until_stopped() -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            while not stop.wait(INTERVAL_SECONDS):
                connection.execute("ANALYZE")

    thread = threading.Thread(target=analyze_until_stopped, name="analyze", daemon=True)
    thread.start()
    try:
        yield f"ANALYZE every {INTERVAL_SECONDS:.0f} s (the server's autovacuum is off)"
    finally:
        stop.set()
        thread.join()
