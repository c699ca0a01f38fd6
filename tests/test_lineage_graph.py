"""The streaming read API the export uses: complete, ordered, paged, a fixed number of queries per page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine, session_factory
from lineage_core.infra.models import Organization
from lineage_core.lineage import graph_prefetch
from lineage_core.lineage.graph import (
    JobLineage,
    count_org_jobs,
    iter_org_graph,
    iter_org_graph_serial,
)
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.parse import check_event
from tests.factories import PG, make_org, orders_event, run_event


def load(db: Session, org: Organization, events: list[dict[str, Any]]) -> None:
    for item in events:
        store_event(db, org.id, check_event(item))


@contextmanager
def counted_selects(database_url: str) -> Iterator[list[str]]:
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    engine = get_engine(database_url)
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_job_comes_out_as_it_went_in(db: Session, org: Organization) -> None:
    load(db, org, [orders_event()])
    (job,) = list(iter_org_graph(db, org.id))
    assert isinstance(job, JobLineage)
    assert (job.namespace, job.name, job.sql, job.sql_dialect) == (
        "airflow-prod",
        "etl.orders_daily",
        "INSERT INTO shop.marts.orders SELECT ...",
        "postgres",
    )
    assert (job.processing_type, job.integration, job.job_type) == ("BATCH", "AIRFLOW", "TASK")
    assert job.lineage_event_time == datetime(2024, 5, 1, 12, tzinfo=UTC)
    (output,) = job.outputs
    assert output.fields[1] == {"name": "total", "type": "NUMERIC"}  # no description was sent
    assert list(output.column_lineage) == ["order_id", "total", "email_hash"]
    assert output.column_lineage["total"] == {
        "inputFields": [
            {
                "namespace": PG,
                "name": "shop.public.orders",
                "field": "amount",
                "transformations": [
                    {
                        "type": "DIRECT",
                        "subtype": "AGGREGATION",
                        "masking": False,
                        "description": "SUM(amount) per order",
                    }
                ],
            }
        ]
    }
    assert output.dataset_dependencies == [
        {
            "namespace": PG,
            "name": "shop.public.customers",
            "field": "id",
            "transformations": [
                {"type": "INDIRECT", "subtype": "JOIN", "masking": False, "description": "join on id"}
            ],
        }
    ]
    with pytest.raises(AttributeError):
        job.name = "changed"  # type: ignore[misc]


def test_input_fields_without_transformations_and_several_transformations_keep_their_shape(
    db: Session, org: Organization
) -> None:
    lineage = {
        "_producer": "https://example.com",
        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
        "fields": {
            "a": {"inputFields": [{"namespace": PG, "name": "src", "field": "x"}]},
            "b": {
                "inputFields": [
                    {
                        "namespace": PG,
                        "name": "src",
                        "field": "y",
                        "transformations": [
                            {"type": "DIRECT", "subtype": "TRANSFORMATION"},
                            {"type": "INDIRECT", "subtype": "FILTER", "masking": True},
                        ],
                    },
                    {"namespace": PG, "name": "other", "field": "z", "transformations": []},
                ]
            },
        },
    }
    load(
        db,
        org,
        [
            run_event(
                inputs=[{"namespace": PG, "name": "src"}],
                outputs=[{"namespace": PG, "name": "dst", "facets": {"columnLineage": lineage}}],
            )
        ],
    )
    (job,) = list(iter_org_graph(db, org.id))
    # Values the producer did not send are left out, never None: the spec's shape, ready to serialize.
    assert job.outputs[0].column_lineage == {
        "a": {"inputFields": [{"namespace": PG, "name": "src", "field": "x", "transformations": []}]},
        "b": {
            "inputFields": [
                {
                    "namespace": PG,
                    "name": "src",
                    "field": "y",
                    "transformations": [
                        {"type": "DIRECT", "subtype": "TRANSFORMATION"},
                        {"type": "INDIRECT", "subtype": "FILTER", "masking": True},
                    ],
                },
                {"namespace": PG, "name": "other", "field": "z", "transformations": []},
            ]
        },
    }
    assert job.outputs[0].dataset_dependencies == []
    # "other" is named by the lineage only, not among the job's inputs: still read with its name.
    assert not any(dataset.name == "other" for dataset in job.inputs)


def test_pages_cover_every_job_once_in_id_order_with_six_queries_each(
    settings: Settings, db: Session, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    load(db, org, list(iter_synthetic_events(23, seed=7)))
    other = make_org(db, "globex")
    load(db, other, list(iter_synthetic_events(5, seed=8)))
    org_id = org.id
    everything = list(iter_org_graph(db, org_id, batch_size=1000))
    db.rollback()

    with counted_selects(settings.database_url) as selects:
        paged = list(iter_org_graph_serial(db, org_id, batch_size=5))
    db.rollback()
    prefetched_statements: list[str] = []
    fetch_page = graph_prefetch.fetch_page

    def counted_fetch(cursor: Any, *args: Any) -> Any:
        return fetch_page(_CountingCursor(cursor, prefetched_statements), *args)

    monkeypatch.setattr(graph_prefetch, "fetch_page", counted_fetch)
    prefetched = list(iter_org_graph(db, org_id, batch_size=5))
    assert paged == prefetched == everything
    assert len(paged) == count_org_jobs(db, org.id) == 23
    assert [job.id for job in paged] == sorted(job.id for job in paged)
    # 5 pages of (jobs, datasets, datasets derived from SQL, fields, lineage, lineage derived from SQL)
    # + the empty page that ends the iteration: the number of queries depends on the number of pages,
    # never on the number of jobs or datasets. The same for the prefetching read (its second connection
    # runs them; every dataset the lineage cites is linked here, so no query names others).
    assert len(selects) == len(prefetched_statements) == 5 * 6 + 1
    assert count_org_jobs(db, other.id) == 5


class _CountingCursor:
    def __init__(self, cursor: Any, statements: list[str]) -> None:
        self._cursor = cursor
        self._statements = statements

    def execute(self, statement: str, params: Any = None) -> Any:
        self._statements.append(statement)
        return self._cursor.execute(statement, params)

    def fetchall(self) -> Any:
        return self._cursor.fetchall()


def test_jobs_of_another_organization_in_the_same_id_range_are_not_read(
    db: Session, org: Organization
) -> None:
    other = make_org(db, "globex")
    # Interleave the two organizations' jobs so that each page's id range contains the other's jobs.
    for index in range(6):
        load(db, org if index % 2 == 0 else other, [orders_event(time=f"2024-05-01T12:00:0{index}Z")])
        load(
            db,
            org if index % 2 == 0 else other,
            [run_event(job=f"job_{index}", inputs=[{"namespace": PG, "name": f"in_{index}"}])],
        )
    mine = list(iter_org_graph(db, org.id, batch_size=2))
    assert [job.name for job in mine] == ["etl.orders_daily", "job_0", "job_2", "job_4"]
    assert all(ds.name.startswith(("in_", "shop.")) for job in mine for ds in job.inputs)
    assert [ds.name for ds in mine[2].inputs] == ["in_2"]


def test_the_generator_is_lazy_and_a_session_can_stream_under_repeatable_read(
    settings: Settings, db: Session, org: Organization
) -> None:
    load(db, org, list(iter_synthetic_events(6, seed=1)))
    session = session_factory(settings.database_url)()
    try:
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        stream = iter_org_graph(session, org.id, batch_size=2)
        first = next(stream)
        # A job added after the snapshot started is not seen by this iteration.
        load(db, org, [run_event(job="zzz_late", inputs=[{"namespace": PG, "name": "late"}])])
        rest = list(stream)
        assert first.id < rest[0].id
        assert "zzz_late" not in {job.name for job in rest}
        assert len(rest) == 5
    finally:
        session.close()


def test_streaming_works_on_sqlite(sqlite_settings: Settings) -> None:
    session = session_factory(sqlite_settings.database_url)()
    try:
        org = make_org(session, "acme")
        load(session, org, [orders_event(), *iter_synthetic_events(7, seed=3)])
        jobs = list(iter_org_graph(session, org.id, batch_size=3))
        assert len(jobs) == 8
        orders = next(job for job in jobs if job.name == "etl.orders_daily")
        assert list(orders.outputs[0].column_lineage) == ["order_id", "total", "email_hash"]
        assert orders.lineage_event_time == datetime(2024, 5, 1, 12, tzinfo=UTC)
    finally:
        session.close()


def test_batch_size_must_be_positive(db: Session, org: Organization) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        next(iter_org_graph(db, org.id, batch_size=0))
