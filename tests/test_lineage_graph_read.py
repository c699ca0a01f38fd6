"""The export's read of the lineage store on PostgreSQL: the next page fetched on a second connection
that shares the snapshot (lineage_core.lineage.graph_prefetch), built by lineage_core.lineage.graph_pages.

It must give exactly what the serial read gives (and SQLite's read: the same events from the same
events stored), see one snapshot however the pages interleave with writes, and fail cleanly, leaving no
thread behind, when its connection is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lineage_core.export.events import EventWriter
from lineage_core.export.snapshot import snapshot_session, write_snapshot_lines
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Organization
from lineage_core.lineage import graph_prefetch
from lineage_core.lineage.derivations import derive_organization
from lineage_core.lineage.graph import (
    DERIVED_MARK,
    JobLineage,
    iter_org_graph,
    iter_org_graph_for_export,
    iter_org_graph_serial,
)
from lineage_core.lineage.graph_json import FieldsMemory, JobJson
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.parse import check_event
from tests.factories import (
    column_lineage,
    dataset,
    documentation,
    facet,
    feature_events,
    input_field,
    make_org,
    run_event,
    schema,
    transformation,
)

SNAPSHOT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
WAREHOUSE = "snowflake://acme"
REVENUE_SQL = (
    "INSERT INTO analytics.marts.revenue (customer_id, revenue) "
    "SELECT o.customer_id, SUM(o.amount) FROM analytics.raw.orders AS o GROUP BY o.customer_id"
)
DELETED = {
    "_producer": "https://example.com",
    "_schemaURL": "https://openlineage.io/x.json",
    "_deleted": True,
}


def load(session: Session, organization_id: int, events: list[dict[str, Any]]) -> None:
    for item in events:
        store_event(session, organization_id, check_event(item))


def varied_events() -> list[dict[str, Any]]:
    """Every shape the read groups: feature_events' (shared datasets, column lineage with several and
    no transformations, fields without types), jobs whose lineage the derivation fills (whole, or only
    the explanations the producer left out), a job whose table lineage is derived, a lineage input no
    job links, and facets deleted after they were sent."""
    orders = dataset(
        "analytics.raw.orders",
        WAREHOUSE,
        schema=schema(("customer_id", "NUMBER"), ("amount", "NUMBER", "Amount")),
    )
    revenue_schema = schema(("customer_id", "NUMBER"), ("revenue", "NUMBER"))
    sql = {"sql": facet({"query": REVENUE_SQL, "dialect": "snowflake"}, "SQLJobFacet")}
    return [
        *feature_events(jobs=25, seed=21),
        # No column lineage sent: all of it is derived from the SQL.
        run_event(
            job="derived.whole",
            job_facets=sql,
            inputs=[orders],
            outputs=[dataset("analytics.marts.revenue", WAREHOUSE, schema=revenue_schema)],
        ),
        # Column lineage sent without explanations: the derivation fills them in.
        run_event(
            job="derived.explanations",
            job_facets=sql,
            inputs=[orders],
            outputs=[
                dataset(
                    "analytics.marts.revenue",
                    WAREHOUSE,
                    schema=revenue_schema,
                    columnLineage=column_lineage(
                        {
                            "revenue": [
                                {
                                    "namespace": WAREHOUSE,
                                    "name": "analytics.raw.orders",
                                    "field": "amount",
                                    "transformations": [{"type": "DIRECT", "subtype": "AGGREGATION"}],
                                }
                            ]
                        }
                    ),
                )
            ],
        ),
        # No inputs or outputs declared: table lineage derived from the SQL.
        run_event(job="derived.tables", job_facets=sql),
        # Column lineage citing a dataset that no job lists among its inputs or outputs.
        run_event(
            job="cites.unlinked",
            inputs=[dataset("shop.public.orders")],
            outputs=[
                dataset(
                    "shop.marts.unlinked",
                    columnLineage=column_lineage(
                        {"x": [input_field("shop.archive.never_linked", "y", transformation())]}
                    ),
                )
            ],
        ),
        # Facets sent, then deleted by a later event.
        run_event(
            job="facets.deleted",
            outputs=[
                dataset(
                    "shop.marts.gone", schema=schema(("a", "TEXT")), documentation=documentation("Soon gone.")
                )
            ],
            job_facets={"documentation": facet({"description": "Soon gone."})},
        ),
        run_event(
            job="facets.deleted",
            time="2024-05-02T12:00:00Z",
            outputs=[dataset("shop.marts.gone", schema=DELETED, documentation=DELETED)],
            job_facets={"documentation": DELETED},
        ),
    ]


def stored_org(session: Session, slug: str, events: list[dict[str, Any]]) -> int:
    org = make_org(session, slug)
    load(session, org.id, events)
    derive_organization(session, org.id)
    session.commit()
    return org.id


def lines(session: Session, organization_id: int) -> list[bytes]:
    return list(write_snapshot_lines(session, organization_id, EventWriter(SNAPSHOT)))


def graph_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "graph-prefetch"]


def test_the_prefetched_read_equals_the_serial_read_on_a_varied_graph(
    settings: Settings, db: Session
) -> None:
    org_id = stored_org(db, "acme", varied_events())
    other_id = stored_org(db, "globex", feature_events(jobs=7, seed=3))  # ids interleave with acme's
    with snapshot_session(settings.database_url) as session:
        serial = list(iter_org_graph_serial(session, org_id, batch_size=4))
    by_name = {job.name: job for job in serial}
    # The graph has what the comparison is about.
    assert DERIVED_MARK in str(by_name["derived.whole"].outputs[0].column_lineage)
    assert by_name["derived.tables"].inputs and by_name["derived.tables"].outputs
    explained = by_name["derived.explanations"].outputs[0].column_lineage["revenue"]["inputFields"][0]
    assert explained["transformations"][0]["description"].endswith(DERIVED_MARK)
    assert by_name["cites.unlinked"].outputs[0].column_lineage["x"]["inputFields"][0]["name"] == (
        "shop.archive.never_linked"
    )
    gone = by_name["facets.deleted"]
    assert (gone.description, gone.outputs[0].fields, gone.outputs[0].description) == (None, (), None)

    for batch_size in (1, 4, 500):
        with snapshot_session(settings.database_url) as session:
            prefetched = list(iter_org_graph(session, org_id, batch_size=batch_size))
        assert prefetched == serial, batch_size
    with snapshot_session(settings.database_url) as session:
        assert lines(session, other_id) == list(
            EventWriter(SNAPSHOT).lines(iter_org_graph_serial(session, other_id))
        )
    assert graph_threads() == []


@pytest.mark.parametrize("jobs_beyond_a_page", [-1, 0, 1])
def test_pages_boundaries_lose_and_repeat_nothing(
    settings: Settings, db: Session, jobs_beyond_a_page: int
) -> None:
    events = feature_events(jobs=6, seed=4)  # 10 jobs, one of them without datasets
    batch_size = len(events) - jobs_beyond_a_page
    org_id = stored_org(db, "acme", events)
    with snapshot_session(settings.database_url) as session:
        serial = list(iter_org_graph_serial(session, org_id, batch_size=batch_size))
        prefetched = list(iter_org_graph(session, org_id, batch_size=batch_size))
    assert len(prefetched) == len(events)
    assert [job.id for job in prefetched] == sorted({job.id for job in prefetched})
    assert prefetched == serial


def test_sqlite_and_postgresql_export_the_same_events(
    settings: Settings, sqlite_settings: Settings, db: Session
) -> None:
    events = varied_events()
    postgres_org = stored_org(db, "acme", events)
    with snapshot_session(settings.database_url) as session:
        from_postgres = lines(session, postgres_org)
    sqlite = session_factory(sqlite_settings.database_url)()
    try:
        sqlite_org = stored_org(sqlite, "acme", events)
        from_sqlite = lines(sqlite, sqlite_org)
    finally:
        sqlite.close()
    assert len(from_postgres) == len({event["job"]["name"] for event in events})
    assert from_sqlite == from_postgres


def test_a_write_between_two_page_fetches_is_not_seen(settings: Settings, db: Session) -> None:
    """The snapshot holds for the pages fetched on the second connection: the export is the org as of
    its first job, though jobs are changed, added and deleted while later pages are still unread."""
    org_id = stored_org(db, "acme", feature_events(jobs=8, seed=6))
    with snapshot_session(settings.database_url) as session:
        before = list(iter_org_graph_serial(session, org_id, batch_size=3))
    last = before[-1]
    with snapshot_session(settings.database_url) as session:
        stream = iter_org_graph(session, org_id, batch_size=3)
        first = next(stream)  # page 1 built, page 2 fetched or on its way, the rest not yet read
        writer = session_factory(settings.database_url)()
        try:
            load(
                writer,
                org_id,
                [
                    run_event(job="zzz.added_late", inputs=[dataset("late.input")]),
                    run_event(
                        job=last.name,
                        namespace=last.namespace,
                        time=(datetime.now(UTC) - timedelta(minutes=1)).isoformat(),  # the newest
                        inputs=[dataset("changed.input")],
                        outputs=[dataset("changed.output", schema=schema(("c", "TEXT")))],
                    ),
                ],
            )
            writer.execute(text("DELETE FROM lineage_jobs WHERE id = :id"), {"id": before[4].id})
            writer.commit()
        finally:
            writer.close()
        during = [first, *stream]
    assert during == before
    with snapshot_session(settings.database_url) as session:
        after = list(iter_org_graph(session, org_id, batch_size=3))
    assert "zzz.added_late" in {job.name for job in after} and before[4].id not in {job.id for job in after}


def test_a_session_that_has_written_reads_its_own_writes(
    settings: Settings, db: Session, org: Organization
) -> None:
    """Its uncommitted rows are in no snapshot a second connection can import: it reads serially."""
    org_id = org.id
    db.commit()
    db.execute(
        text(
            "INSERT INTO lineage_jobs (organization_id, namespace, name, created_at, updated_at) "
            "VALUES (:org, 'ns', 'uncommitted', now(), now())"
        ),
        {"org": org_id},
    )
    assert [job.name for job in iter_org_graph(db, org_id)] == ["uncommitted"]
    db.rollback()


def _terminate(settings: Settings, pid: int) -> None:
    with session_factory(settings.database_url)() as admin:
        admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})


def test_losing_the_second_connection_fails_the_read_cleanly(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=8, seed=9))
    pids: list[int] = []
    original = graph_prefetch.fetch_page

    def fetch_then_lose_connection(cursor: Any, organization_id: int, after: int, batch_size: int) -> Any:
        if after and not pids:  # the second page: the backend of this connection goes away
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
            _terminate(settings, pids[0])
        return original(cursor, organization_id, after, batch_size)

    monkeypatch.setattr(graph_prefetch, "fetch_page", fetch_then_lose_connection)
    with snapshot_session(settings.database_url) as session:
        stream = iter_org_graph(session, org_id, batch_size=3)
        read = []
        with pytest.raises(OperationalError):
            for job in stream:
                read.append(job)
        assert len(read) == 3  # the first page, then the error: never a partial page
        assert graph_threads() == []
        # The caller's own connection and snapshot are untouched.
        assert session.execute(text("SELECT 1")).scalar_one() == 1
    assert pids and graph_threads() == []


def test_closing_the_read_early_stops_its_thread(settings: Settings, db: Session) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=20, seed=2))
    with snapshot_session(settings.database_url) as session:
        stream: Iterator[JobLineage] = iter_org_graph(session, org_id, batch_size=2)
        next(stream)
        assert len(graph_threads()) == 1
        stream.close()  # type: ignore[attr-defined]
        assert graph_threads() == []


def test_closing_the_export_lines_stops_the_reads_thread(settings: Settings, db: Session) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=20, seed=2))
    with snapshot_session(settings.database_url) as session:
        body = write_snapshot_lines(session, org_id, EventWriter(SNAPSHOT))
        next(body)
        assert graph_threads()  # the export's read: a thread per half of each page (one may be done)
        body.close()  # as the upload does when it fails
        assert graph_threads() == []


def test_ending_the_sessions_transaction_stops_a_read_left_suspended(settings: Settings, db: Session) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=20, seed=2))
    session = session_factory(settings.database_url)()
    stream = iter_org_graph(session, org_id, batch_size=2)
    next(stream)
    assert len(graph_threads()) == 1
    session.rollback()  # the snapshot's transaction ends: the read may not go on
    assert graph_threads() == []
    with pytest.raises(RuntimeError, match="transaction ended"):
        list(stream)
    session.close()


def test_a_failure_while_building_a_page_stops_the_thread(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=10, seed=8))

    def broken_build(_page: Any) -> Iterator[JobLineage]:
        raise RuntimeError("building failed")
        yield  # a generator, as build_page is

    monkeypatch.setattr(graph_prefetch, "build_page", broken_build)
    with (
        snapshot_session(settings.database_url) as session,
        pytest.raises(RuntimeError, match="building failed"),
    ):
        list(iter_org_graph(session, org_id, batch_size=2))
    assert graph_threads() == []


# The export's read (lineage_core.lineage.graph_json): the bulk of each job in JSON written by PostgreSQL,
# each page's two halves fetched on two connections. It must write the very bytes the serial read's jobs
# give the event writer.

# Everything JSON escapes (quotes, backslashes, control characters) and what it must not (non-ASCII).
ODD = 'say "hi"\\ back\\slash\ttab\nline\r\x01\x08\x0c\x1f \x7f é € 😀 \u2028'


def odd_text_events() -> list[dict[str, Any]]:
    """Names, descriptions, fields and transformations holding ODD, in every place the read turns
    into JSON: job, datasets, schema fields (typed, untyped, described), output fields and input
    fields of column lineage, transformation subtypes and descriptions, dataset-level dependencies."""
    source = dataset(
        f"raw.{ODD}",
        f"ns {ODD}",
        schema=facet(
            {"fields": [{"name": f"id {ODD}", "description": ODD}, {"name": "plain"}]}, "SchemaDatasetFacet"
        ),
        documentation=documentation(ODD),
    )
    return [
        run_event(
            job=f"job {ODD}",
            namespace=f"ns {ODD}",
            job_facets={
                "documentation": facet({"description": ODD}),
                "sql": facet({"query": f"SELECT '{ODD}'", "dialect": ODD}, "SQLJobFacet"),
            },
            inputs=[source],
            outputs=[
                dataset(
                    f"marts.{ODD}",
                    schema=schema((f"out {ODD}", f"TYPE {ODD}", ODD), ("second", "TEXT")),
                    columnLineage=column_lineage(
                        {
                            f"out {ODD}": [
                                input_field(
                                    f"raw.{ODD}",
                                    f"id {ODD}",
                                    transformation("DIRECT", ODD, ODD, True),
                                    transformation("INDIRECT", "FILTER", f"second {ODD}"),
                                    namespace=f"ns {ODD}",
                                )
                            ],
                            "second": [input_field(f"raw.{ODD}", "plain", namespace=f"ns {ODD}")],
                        },
                        dataset=[
                            input_field(
                                f"raw.{ODD}",
                                "plain",
                                transformation("INDIRECT", "JOIN", ODD),
                                namespace=f"ns {ODD}",
                            )
                        ],
                    ),
                )
            ],
        )
    ]


def serial_lines(session: Session, organization_id: int, writer: EventWriter | None = None) -> list[bytes]:
    writer = writer or EventWriter(SNAPSHOT)
    return list(writer.lines(iter_org_graph_serial(session, organization_id)))


def test_the_export_read_writes_the_bytes_of_the_serial_read(settings: Settings, db: Session) -> None:
    org_id = stored_org(db, "acme", [*varied_events(), *odd_text_events()])
    stored_org(db, "globex", feature_events(jobs=7, seed=3))  # ids interleave with acme's
    with snapshot_session(settings.database_url) as session:
        expected = serial_lines(session, org_id)
    escaped = orjson.dumps(ODD)[1:-1]
    assert sum(line.count(escaped) for line in expected) >= 15  # every place of odd_text_events
    assert any(DERIVED_MARK.encode() in line for line in expected)
    for batch_size in (1, 4, 500):
        with snapshot_session(settings.database_url) as session:
            jobs = list(iter_org_graph_for_export(session, org_id, batch_size=batch_size))
            assert {type(job) for job in jobs} == {JobJson}
            assert list(EventWriter(SNAPSHOT).lines(jobs)) == expected, batch_size
    assert graph_threads() == []


@pytest.mark.parametrize("jobs_beyond_a_page", [-1, 0, 1])
def test_the_export_reads_pages_boundaries_lose_and_repeat_nothing(
    settings: Settings, db: Session, jobs_beyond_a_page: int
) -> None:
    events = feature_events(jobs=6, seed=4)
    org_id = stored_org(db, "acme", events)
    with snapshot_session(settings.database_url) as session:
        expected = serial_lines(session, org_id)
        writer = EventWriter(SNAPSHOT)
        batch_size = len(events) - jobs_beyond_a_page
        written = list(writer.lines(iter_org_graph_for_export(session, org_id, batch_size=batch_size)))
    assert len(written) == len(events) and written == expected


def test_the_export_read_as_job_lineage_is_the_serial_read(settings: Settings, db: Session) -> None:
    """The public type rebuilt from the JSON (what the size rule trims) is the serial read's job, but
    that a field no producer typed says UNKNOWN, as every event writes it."""
    org_id = stored_org(db, "acme", varied_events())
    with snapshot_session(settings.database_url) as session:
        serial = list(iter_org_graph_serial(session, org_id))
        rebuilt = [job.as_job_lineage() for job in iter_org_graph_for_export(session, org_id, batch_size=3)]

    def typed(job: JobLineage) -> JobLineage:
        def fields(items: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(
                {
                    "name": f["name"],
                    "type": f.get("type", "UNKNOWN"),
                    **({"description": f["description"]} if "description" in f else {}),
                }
                for f in items
            )

        return replace(
            job,
            inputs=tuple(replace(d, fields=fields(d.fields)) for d in job.inputs),
            outputs=tuple(replace(d, fields=fields(d.fields)) for d in job.outputs),
        )

    assert any(f.get("type") is None for job in serial for d in job.inputs for f in d.fields)
    assert rebuilt == [typed(job) for job in serial]


def test_the_export_read_trims_large_events_as_the_serial_read(
    settings: Settings, db: Session, caplog: pytest.LogCaptureFixture
) -> None:
    org_id = stored_org(db, "acme", [*varied_events(), *odd_text_events()])
    with snapshot_session(settings.database_url) as session:
        expected_writer = EventWriter(SNAPSHOT, max_event_bytes=950)
        expected = serial_lines(session, org_id, expected_writer)
        writer = EventWriter(SNAPSHOT, max_event_bytes=950)
        written = list(writer.lines(iter_org_graph_for_export(session, org_id, batch_size=4)))
    assert expected_writer.stats.trimmed and expected_writer.stats.omitted  # the rule did apply
    assert written == expected and writer.stats == expected_writer.stats


def test_a_write_between_two_page_fetches_is_not_in_the_export(settings: Settings, db: Session) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=8, seed=6))
    with snapshot_session(settings.database_url) as session:
        before = serial_lines(session, org_id)
        jobs = list(iter_org_graph_serial(session, org_id))
    with snapshot_session(settings.database_url) as session:
        stream = EventWriter(SNAPSHOT).lines(iter_org_graph_for_export(session, org_id, batch_size=3))
        first = next(stream)
        writer = session_factory(settings.database_url)()
        try:
            load(
                writer,
                org_id,
                [
                    run_event(job="zzz.added_late", inputs=[dataset("late.input")]),
                    run_event(
                        job=jobs[-1].name,
                        namespace=jobs[-1].namespace,
                        time=(datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
                        inputs=[dataset("changed.input")],
                        outputs=[dataset("changed.output", schema=schema(("c", "TEXT")))],
                    ),
                ],
            )
            writer.execute(text("DELETE FROM lineage_jobs WHERE id = :id"), {"id": jobs[4].id})
            writer.commit()
        finally:
            writer.close()
        during = [first, *stream]
    assert during == before
    with snapshot_session(settings.database_url) as session:
        assert serial_lines(session, org_id) != before


@pytest.mark.parametrize("half", ["fetch_jobs_page", "fetch_lineage_page"])
def test_losing_a_connection_of_the_export_read_fails_it_cleanly(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch, half: str
) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=8, seed=9))
    pids: list[int] = []
    original = getattr(graph_prefetch, half)

    def fetch_then_lose_connection(
        cursor: Any, organization_id: int, after: int, batch_size: int, *rest: Any
    ) -> Any:
        if after and not pids:  # the second page: the backend of this connection goes away
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
            _terminate(settings, pids[0])
        return original(cursor, organization_id, after, batch_size, *rest)

    monkeypatch.setattr(graph_prefetch, half, fetch_then_lose_connection)
    with snapshot_session(settings.database_url) as session:
        body = EventWriter(SNAPSHOT).lines(iter_org_graph_for_export(session, org_id, batch_size=3))
        written = []
        with pytest.raises(OperationalError):
            for line in body:
                written.append(line)
        assert len(written) == 3  # the first page, then the error: never a partial page
        assert graph_threads() == []
        assert session.execute(text("SELECT 1")).scalar_one() == 1
    assert pids and graph_threads() == []


class RecordingCursor:
    """A psycopg cursor that records the dataset ids each query asks for."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.asked: list[list[int]] = []

    def execute(self, statement: str, params: dict[str, Any]) -> None:
        self.asked.append(list(params["ids"]))
        self.cursor.execute(statement, params)

    def fetchall(self) -> list[Any]:
        return self.cursor.fetchall()  # type: ignore[no-any-return]


def test_the_fields_memory_fetches_a_dataset_once_while_it_is_remembered(db: Session) -> None:
    org_id = stored_org(db, "acme", feature_events(jobs=6, seed=4))
    ids = list(
        db.scalars(
            text("SELECT id FROM lineage_datasets WHERE organization_id = :org ORDER BY id"), {"org": org_id}
        )
    )
    with_fields = set(db.scalars(text("SELECT DISTINCT dataset_id FROM lineage_dataset_fields")))
    assert len(ids) >= 5 and set(ids) - with_fields  # some datasets have no fields
    with db.connection().connection.cursor() as raw:
        cursor = RecordingCursor(raw)

        def fresh(dataset_ids: list[int]) -> dict[int, str]:
            return FieldsMemory().fields(raw, dataset_ids)

        memory = FieldsMemory(capacity=3)
        assert memory.fields(cursor, ids[:3]) == fresh(ids[:3])
        assert set(fresh(ids)) == set(ids) & with_fields  # datasets without fields are left out
        assert memory.fields(cursor, ids[1:3]) == fresh(ids[1:3])  # remembered: not asked again
        assert memory.fields(cursor, [ids[3], ids[1]]) == fresh([ids[3], ids[1]])  # ids[0] is dropped
        assert memory.fields(cursor, [ids[0]]) == fresh([ids[0]])
    assert cursor.asked == [ids[:3], [ids[3]], [ids[0]]]
