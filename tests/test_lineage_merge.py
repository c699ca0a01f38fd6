"""The merge rules, one by one, against real PostgreSQL."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Organization
from lineage_core.lineage.event import Sql
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.merge import ApplyResult, LineageOutcome
from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageJob,
    LineageJobDataset,
)
from lineage_core.lineage.parse import check_event
from tests.factories import (
    column_lineage,
    dataset,
    documentation,
    facet,
    input_field,
    make_org,
    orders_event,
    run_event,
    schema,
    transformation,
)
from tests.readback import graph_of

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def apply(db: Session, org: Organization, event: dict[str, Any]) -> ApplyResult:
    return store_event(db, org.id, check_event(event, now=NOW))


def only_job(db: Session, org: Organization) -> dict[str, Any]:
    jobs = graph_of(db, org.id)
    assert len(jobs) == 1
    return jobs[0]


def names(datasets: list[dict[str, Any]]) -> list[str]:
    return [d["name"] for d in datasets]


def test_a_complete_event_defines_the_job(db: Session, org: Organization) -> None:
    result = apply(db, org, orders_event())
    assert result.lineage is LineageOutcome.REPLACED
    assert set(result.job_facets) == {"sql", "documentation", "jobType"}
    job = only_job(db, org)
    assert (job["namespace"], job["name"], job["sql_dialect"], job["integration"]) == (
        "airflow-prod",
        "etl.orders_daily",
        "postgres",
        "AIRFLOW",
    )
    assert job["description"] == "Daily orders mart."
    assert names(job["inputs"]) == ["shop.public.orders", "shop.public.customers"]
    output = job["outputs"][0]
    assert output["description"] == "Orders with customer e-mail hashes."
    assert [f["name"] for f in output["fields"]] == ["order_id", "total", "email_hash"]
    assert output["fields"][0] == {"name": "order_id", "type": "BIGINT", "description": "Order id"}
    assert list(output["column_lineage"]) == ["order_id", "total", "email_hash"]
    assert output["column_lineage"]["email_hash"]["inputFields"] == [
        {
            "namespace": "postgres://db.internal:5432",
            "name": "shop.public.customers",
            "field": "email",
            "transformations": [
                {
                    "type": "DIRECT",
                    "subtype": "TRANSFORMATION",
                    "masking": True,
                    "description": "sha256(email)",
                }
            ],
        }
    ]
    assert output["dataset_dependencies"][0]["transformations"][0]["subtype"] == "JOIN"
    assert job["inputs"][1]["fields"] == [
        {"name": "id", "type": "BIGINT"},
        {"name": "email", "type": "TEXT"},
    ]


def test_the_newest_event_with_inputs_and_outputs_replaces_them_all(db: Session, org: Organization) -> None:
    apply(db, org, orders_event(time="2024-05-01T12:00:00Z"))
    newer = run_event(
        time="2024-05-02T12:00:00Z",
        inputs=[dataset("shop.public.refunds")],
        outputs=[dataset("shop.marts.refunds")],
    )
    assert apply(db, org, newer).lineage is LineageOutcome.REPLACED
    job = only_job(db, org)
    assert names(job["inputs"]) == ["shop.public.refunds"]
    assert names(job["outputs"]) == ["shop.marts.refunds"]
    assert job["outputs"][0]["column_lineage"] == {}  # replaced too: the new event carried none
    assert job["lineage_event_time"] == datetime(2024, 5, 2, 12, tzinfo=UTC)
    # Job facets the newer event did not carry are kept.
    assert job["sql_dialect"] == "postgres"


@pytest.mark.parametrize("event_type", ["START", "RUNNING", "OTHER", "COMPLETE"])
def test_events_without_inputs_and_outputs_do_not_erase_lineage(
    db: Session, org: Organization, event_type: str
) -> None:
    apply(db, org, orders_event(time="2024-05-01T12:00:00Z"))
    before = only_job(db, org)
    result = apply(db, org, run_event(event_type=event_type, time="2024-05-03T00:00:00Z"))
    assert result.lineage is LineageOutcome.NOT_CARRIED
    assert only_job(db, org) == before


@pytest.mark.parametrize("event_type", ["FAIL", "ABORT"])
def test_failed_and_aborted_runs_do_not_erase_lineage(
    db: Session, org: Organization, event_type: str
) -> None:
    apply(db, org, orders_event(time="2024-05-01T12:00:00Z"))
    before = only_job(db, org)
    failed = run_event(
        event_type=event_type,
        time="2024-05-03T00:00:00Z",
        inputs=[dataset("shop.public.orders")],
        outputs=[dataset("shop.marts.other")],
    )
    assert apply(db, org, failed).lineage is LineageOutcome.NOT_CARRIED
    assert only_job(db, org) == before


def test_a_start_with_datasets_then_the_complete_gives_the_complete_lineage(
    db: Session, org: Organization
) -> None:
    start = orders_event(time="2024-05-01T12:00:00Z", event_type="START")
    del start["outputs"][0]["facets"]["columnLineage"]
    apply(db, org, start)
    apply(db, org, orders_event(time="2024-05-01T12:05:00Z"))
    assert len(only_job(db, org)["outputs"][0]["column_lineage"]) == 3


def test_an_older_event_arriving_late_does_not_overwrite_newer_state(db: Session, org: Organization) -> None:
    newer = run_event(
        time="2024-05-02T00:00:00Z",
        inputs=[dataset("shop.public.orders", schema=schema(("id", "BIGINT"), ("status", "TEXT")))],
        outputs=[dataset("shop.marts.orders", documentation=documentation("new description"))],
        job_facets={"sql": facet({"query": "SELECT 2"})},
    )
    apply(db, org, newer)
    before = only_job(db, org)
    older = orders_event(time="2024-05-01T00:00:00Z")
    result = apply(db, org, older)
    # Job facets documentation and jobType, the customers' schema and the mart's schema: never sent newer.
    assert result == ApplyResult(LineageOutcome.STALE, ("documentation", "jobType"), 2)
    after = only_job(db, org)
    # Lineage, the newer schema, the newer docs and the newer SQL are kept...
    assert after["inputs"] == before["inputs"]
    assert after["outputs"][0]["description"] == "new description"
    assert after["sql"] == "SELECT 2"
    # ...while facets only the older event ever sent fill in, since nothing newer describes them.
    assert after["description"] == "Daily orders mart."
    assert after["integration"] == "AIRFLOW"
    assert [f["name"] for f in after["outputs"][0]["fields"]] == ["order_id", "total", "email_hash"]


def test_dataset_facets_update_the_dataset_from_any_event(db: Session, org: Organization) -> None:
    apply(db, org, orders_event(time="2024-05-01T00:00:00Z"))
    dataset_event = {
        "eventTime": "2024-05-02T00:00:00Z",
        "producer": "https://example.com",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": dataset(
            "shop.marts.orders",
            schema=schema(("order_id", "BIGINT", "The order"), ("currency", "CHAR(3)")),
            documentation=documentation("Orders, now with currency."),
        ),
    }
    result = apply(db, org, dataset_event)
    assert result == ApplyResult(LineageOutcome.NOT_CARRIED, (), 2)
    output = only_job(db, org)["outputs"][0]
    assert output["description"] == "Orders, now with currency."
    assert output["fields"] == [
        {"name": "order_id", "type": "BIGINT", "description": "The order"},
        {"name": "currency", "type": "CHAR(3)"},
    ]
    # A START without datasets' facets, and a failed run, still update the datasets they describe.
    failed = run_event(
        event_type="FAIL",
        time="2024-05-03T00:00:00Z",
        outputs=[dataset("shop.marts.orders", documentation=documentation("Described by a failed run."))],
    )
    apply(db, org, failed)
    assert only_job(db, org)["outputs"][0]["description"] == "Described by a failed run."


def test_a_dataset_listed_as_input_and_output_takes_the_output_schema(db: Session, org: Organization) -> None:
    event = run_event(
        inputs=[dataset("shop.public.counts", schema=schema(("n", "INT")))],
        outputs=[dataset("shop.public.counts", schema=schema(("n", "BIGINT")))],
    )
    apply(db, org, event)
    job = only_job(db, org)
    assert job["inputs"][0]["fields"] == [{"name": "n", "type": "BIGINT"}]


def test_deleted_facets_clear_what_was_held(db: Session, org: Organization) -> None:
    apply(db, org, orders_event(time="2024-05-01T00:00:00Z"))
    deleting = run_event(
        event_type="OTHER",
        time="2024-05-02T00:00:00Z",
        outputs=[dataset("shop.marts.orders", schema={"_deleted": True}, documentation={"_deleted": True})],
        job_facets={"sql": {"_deleted": True}},
    )
    apply(db, org, deleting)
    job = only_job(db, org)
    assert (job["sql"], job["sql_dialect"]) == (None, None)
    output = next(o for o in job["outputs"] if o["name"] == "shop.marts.orders")
    assert (output["description"], output["fields"]) == (None, [])


def _last_updates(db: Session) -> tuple[Any, Any]:
    stamps = (
        db.scalar(select(func.max(LineageJob.updated_at))),
        db.scalar(select(func.max(LineageDataset.updated_at))),
    )
    db.rollback()
    return stamps


def test_posting_the_same_event_twice_changes_nothing(db: Session, org: Organization) -> None:
    event = orders_event()
    apply(db, org, event)
    before = only_job(db, org)
    stamps = _last_updates(db)
    result = apply(db, org, event)
    assert result == ApplyResult(LineageOutcome.UNCHANGED, (), 0)
    assert not result.changed
    assert only_job(db, org) == before
    assert _last_updates(db) == stamps


def test_a_newer_run_with_identical_lineage_only_records_its_time(db: Session, org: Organization) -> None:
    apply(db, org, orders_event(time="2024-05-01T00:00:00Z"))
    result = apply(db, org, orders_event(time="2024-05-02T00:00:00Z"))
    assert result == ApplyResult(LineageOutcome.REFRESHED, (), 0)
    assert only_job(db, org)["lineage_event_time"] == datetime(2024, 5, 2, tzinfo=UTC)
    # The recorded time matters: an event between the two is now too old.
    between = run_event(time="2024-05-01T12:00:00Z", inputs=[dataset("x")], outputs=[dataset("y")])
    assert apply(db, org, between).lineage is LineageOutcome.STALE


def test_at_the_same_instant_the_complete_wins_over_the_start(db: Session, org: Organization) -> None:
    complete = orders_event(time="2024-05-01T00:00:00Z")
    start = run_event(
        event_type="START", time="2024-05-01T00:00:00Z", inputs=[dataset("a")], outputs=[dataset("b")]
    )
    apply(db, org, complete)
    assert apply(db, org, start).lineage is LineageOutcome.STALE
    assert names(only_job(db, org)["outputs"]) == ["shop.marts.orders"]


def _three_versions() -> list[dict[str, Any]]:
    v1 = orders_event(time="2024-05-01T00:00:00Z")
    v2 = run_event(
        time="2024-05-02T00:00:00Z",
        inputs=[dataset("shop.public.orders", schema=schema(("id", "BIGINT"), ("region", "TEXT")))],
        outputs=[
            dataset(
                "shop.marts.orders",
                columnLineage=column_lineage({"region": [input_field("shop.public.orders", "region")]}),
            )
        ],
    )
    v3 = {
        "eventTime": "2024-05-03T00:00:00Z",
        "producer": "https://example.com",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": dataset("shop.marts.orders", documentation=documentation("v3")),
    }
    fail = run_event(
        event_type="FAIL",
        time="2024-05-04T00:00:00Z",
        inputs=[dataset("gone")],
        job_facets={"sql": facet({"query": "SELECT 4"})},
    )
    return [v1, v2, v3, fail]


def test_the_final_graph_does_not_depend_on_arrival_order(db: Session, org: Organization) -> None:
    events = _three_versions()
    graphs = []
    for order_index, order in enumerate(itertools.permutations(events)):
        target = make_org(db, f"perm-{order_index}")
        for event in order:
            apply(db, target, event)
        graphs.append(graph_of(db, target.id))
    assert all(graph == graphs[0] for graph in graphs)
    final = graphs[0][0]
    assert names(final["inputs"]) == ["shop.public.orders"]
    assert [f["name"] for f in final["inputs"][0]["fields"]] == ["id", "region"]
    assert list(final["outputs"][0]["column_lineage"]) == ["region"]
    assert final["outputs"][0]["description"] == "v3"
    assert final["sql"] == "SELECT 4"


def test_one_organization_never_touches_another(db: Session, org: Organization) -> None:
    other = make_org(db, "globex")
    apply(db, other, orders_event(time="2024-05-01T00:00:00Z"))
    before = graph_of(db, other.id)
    apply(
        db, org, orders_event(time="2024-05-02T00:00:00Z", job_facets={"sql": facet({"query": "SELECT 1"})})
    )
    assert graph_of(db, other.id) == before
    assert graph_of(db, org.id)[0]["sql"] == "SELECT 1"
    # Same names, separate rows.
    assert db.scalar(select(func.count()).select_from(LineageDataset)) == 6


def test_a_failing_event_leaves_nothing_behind(db: Session, org: Organization) -> None:
    event = check_event(orders_event(), now=NOW)
    assert event.job is not None
    # Bypass the checks to hit a database constraint at the very end of the event (the job's last UPDATE):
    # the job, datasets, fields and lineage written before it must all be rolled back.
    broken = replace(event, job=replace(event.job, sql=Sql("SELECT", "x" * 300)))
    with pytest.raises(DBAPIError, match="value too long"):
        store_event(db, org.id, broken)
    for table in (LineageJob, LineageDataset, LineageDatasetField, LineageJobDataset, LineageColumnLineage):
        assert db.scalar(select(func.count()).select_from(table)) == 0


def test_concurrent_events_on_shared_datasets_all_land_without_deadlocks(
    settings: Settings, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight threads, overlapping jobs and datasets: no deadlock at all, the newest state wins.

    Row locks taken with FOR UPDATE deadlocked here against the KEY SHARE locks of foreign-key checks
    (the store retried them, slowly); store_event sleeps only before a retry, so none may happen.
    """
    factory = session_factory(settings.database_url)
    errors: list[BaseException] = []
    retries: list[float] = []
    monkeypatch.setattr("lineage_core.lineage.ingest.time.sleep", retries.append)

    def worker(thread: int) -> None:
        session = factory()
        try:
            for step in range(10):
                minute = step * 8 + thread
                event = run_event(
                    job=f"job_{step % 3}",
                    time=f"2024-05-01T00:{minute // 60:02d}:{minute % 60:02d}Z",
                    inputs=[
                        dataset(f"shared_{(thread + k) % 4}", schema=schema(("id", "INT"))) for k in range(3)
                    ],
                    outputs=[
                        dataset(
                            f"out_{step % 3}",
                            schema=schema(("id", "INT"), (f"c{minute}", "TEXT")),
                            columnLineage=column_lineage(
                                {"id": [input_field(f"shared_{thread % 4}", "id", transformation())]}
                            ),
                        )
                    ],
                )
                store_event(session, org.id, check_event(event, now=NOW))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            session.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert retries == []
    session = factory()
    try:
        jobs = {job["name"]: job for job in graph_of(session, org.id)}
    finally:
        session.close()
    assert set(jobs) == {"job_0", "job_1", "job_2"}
    # The newest event of job_0 is step 9 of thread 7 (00:01:19); its output schema wins.
    assert jobs["job_0"]["lineage_event_time"] == datetime(2024, 5, 1, 0, 1, 19, tzinfo=UTC)
    assert [f["name"] for f in jobs["job_0"]["outputs"][0]["fields"]][-1] == "c79"
