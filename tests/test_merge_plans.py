"""The merge's statements read only the rows they name, however large the organization.

PostgreSQL guesses 100 rows for ``json_to_recordset``; against an organization of a few thousand jobs
that guess made a hash join over the whole organization the cheapest plan, so storing one event read
every job and dataset of its organization (and grew slower with each one stored). Each statement the
one-event path runs is explained here, with the parameters it ran with, against an organization of
1,500 jobs, under the merge's planner settings, with no planner statistics (a new database), with ones
taken when it was small (autovacuum off or behind), with fresh ones, and with ones taken before it
existed (an organization onboarded since the last ANALYZE): none may scan the jobs or datasets of the
organization.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.infra import migrate
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine, session_factory
from lineage_core.lineage.batch_sql import MERGE_PLANNER
from lineage_core.lineage.ingest import store_batch, store_event
from lineage_core.lineage.parse import parse_event
from tests.factories import make_org
from tests.services import throwaway_postgres_database

JOBS = 1500
EARLIER_JOBS = 5000
GRAPH_TABLES = {"lineage_jobs", "lineage_datasets"}
# The unique indexes a key or an id is probed in: any other index of these tables (by organization)
# reads the whole organization.
PROBES = {
    "uq_lineage_jobs_org_namespace_name",
    "lineage_jobs_pkey",
    "uq_lineage_datasets_org_namespace_name",
    "lineage_datasets_pkey",
}


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(node type, relation, index) of every node of ``plan`` that reads a table."""
    if "Relation Name" in plan:
        yield plan["Node Type"], plan["Relation Name"], plan.get("Index Name")
    for child in plan.get("Plans", ()):
        yield from _scans(child)


def _statements_of_one_event(database_url: str, db: Session, organization_id: int) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        seen.append((statement, parameters))

    (new_job,) = iter_synthetic_events(1, seed=99)
    engine = get_engine(database_url)
    event.listen(engine, "before_cursor_execute", record)
    try:
        store_event(db, organization_id, parse_event(orjson.dumps(new_job)))
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return [(s, p) for s, p in seen if s.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT"))]


def _analyze(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE lineage_jobs, lineage_datasets")


@contextmanager
def _database(settings: Settings, statistics: str) -> Iterator[str]:
    """The test's database: a new one if it must never have been analyzed (the session's may have
    been). Autovacuum leaves its graph tables alone meanwhile: an ANALYZE of its own would turn the case
    into another."""
    if statistics != "none":
        with _no_autovacuum(settings.database_url):
            yield settings.database_url
        return
    with throwaway_postgres_database() as url:
        migrate.upgrade(url)
        with _no_autovacuum(url):
            yield url


@contextmanager
def _no_autovacuum(url: str) -> Iterator[None]:
    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as conn:
        for table in sorted(GRAPH_TABLES):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    try:
        yield
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            for table in sorted(GRAPH_TABLES):
                conn.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")


@pytest.mark.parametrize(
    "statistics",
    ["none", "when small", "fresh", "before it existed"],
    ids=["never analyzed", "analyzed when small", "analyzed", "new after ANALYZE"],
)
def test_one_event_reads_only_its_own_rows_in_a_large_organization(
    settings: Settings, statistics: str
) -> None:
    with _database(settings, statistics) as url, session_factory(url)() as db:
        plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
        events = [parse_event(orjson.dumps(e)) for e in iter_synthetic_events(JOBS, seed=7)]
        if statistics == "before it existed":
            # The statistics know only another organization: PostgreSQL estimates one row for this one,
            # and an index by organization alone looked as cheap as the unique key (from about 5,000
            # rows in the table: smaller indexes tie the other way).
            earlier = make_org(db, "earlier").id
            older = [parse_event(orjson.dumps(e)) for e in iter_synthetic_events(EARLIER_JOBS, seed=3)]
            for start in range(0, EARLIER_JOBS, 1000):
                store_batch(db, earlier, older[start : start + 1000])
            _analyze(plain)
        org = make_org(db, "large")
        store_batch(db, org.id, events[:10])
        if statistics == "when small":
            _analyze(plain)
        store_batch(db, org.id, events[10:])
        if statistics == "fresh":
            _analyze(plain)
        statements = _statements_of_one_event(url, db, org.id)
        assert len(statements) >= 5

        with psycopg.connect(plain) as conn:
            conn.execute(MERGE_PLANNER.text)  # the planner's settings of every merge transaction
            for statement, parameters in statements:
                (row,) = conn.execute(f"EXPLAIN (FORMAT JSON) {statement}", parameters).fetchall()
                plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]["Plan"]
                scans = [s for s in _scans(plan) if s[1] in GRAPH_TABLES and s[0].endswith("Scan")]
                whole = [s for s in scans if not s[0].startswith("Index") or s[2] not in PROBES]
                assert not whole, f"{statement[:80]}... scans {whole}"
