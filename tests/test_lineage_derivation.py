"""Column lineage derived from SQL, through the store: a producer that sends only SQL and table lineage
gets column lineage and explanations in the export; what producers report always wins.

The engine's own SQL cases are in tests/derive/; these tests go through PostgreSQL, the derivation
pass, the graph read and the event writer, as the worker and the export do.
"""

from __future__ import annotations

import copy
import io
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.export.events import EventWriter
from lineage_core.export.snapshot import write_snapshot_lines
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Organization, User
from lineage_core.lineage.derivation_schedule import (
    derive_job_id,
    derive_organization_now,
    enqueue_due_derivations,
    organizations_due,
)
from lineage_core.lineage.derivation_status import derivation_counts, derivation_problems
from lineage_core.lineage.derivations import derive_organization
from lineage_core.lineage.graph import DERIVED_MARK
from lineage_core.lineage.importer import import_events
from lineage_core.lineage.merge import apply_event
from lineage_core.lineage.parse import check_event
from tests.factories import (
    column_lineage,
    dataset,
    facet,
    input_field,
    make_org,
    run_event,
    schema,
    store_events,
    transformation,
)
from tests.openlineage_spec import problems_of_file
from tests.services import running_process
from tests.web import login

SNAPSHOT = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
WAREHOUSE = "snowflake://acme"
VALIDATOR = Path(__file__).resolve().parents[2] / "shared" / "tools" / "validate_openlineage.py"

REVENUE_SQL = """
INSERT INTO analytics.marts.customer_revenue (customer_id, email_hash, revenue, orders)
SELECT o.customer_id,
       SHA2(c.email, 256),
       SUM(o.amount),
       COUNT(o.order_id)
FROM raw.orders AS o
JOIN raw.customers AS c ON c.customer_id = o.customer_id
WHERE o.status = 'paid'
GROUP BY o.customer_id, c.email
"""


def _sql(query: str, dialect: str = "snowflake") -> dict[str, Any]:
    return {"sql": facet({"query": query, "dialect": dialect}, "SQLJobFacet")}


def revenue_event(
    time: str = "2026-11-30T10:00:00Z", query: str = REVENUE_SQL, **outputs: Any
) -> dict[str, Any]:
    """An Airflow-style event: SQL and table-level inputs/outputs with schemas, no column lineage."""
    output_facets = {
        "schema": schema(
            ("customer_id", "NUMBER"), ("email_hash", "TEXT"), ("revenue", "NUMBER"), ("orders", "NUMBER")
        ),
        **outputs,
    }
    return run_event(
        job="revenue.build_customer_revenue",
        time=time,
        namespace="airflow-prod",
        job_facets=_sql(query),
        inputs=[
            dataset(
                "analytics.raw.orders",
                WAREHOUSE,
                schema=schema(
                    ("order_id", "NUMBER"),
                    ("customer_id", "NUMBER"),
                    ("amount", "NUMBER"),
                    ("status", "TEXT"),
                ),
            ),
            dataset(
                "analytics.raw.customers",
                WAREHOUSE,
                schema=schema(("customer_id", "NUMBER"), ("email", "TEXT"), ("country", "TEXT")),
            ),
        ],
        outputs=[dataset("analytics.marts.customer_revenue", WAREHOUSE, **output_facets)],
    )


def exported(db: Session, organization_id: int) -> list[dict[str, Any]]:
    """The organization's export file, as the worker writes it, parsed."""
    body = b"".join(write_snapshot_lines(db, organization_id, EventWriter(SNAPSHOT)))
    db.rollback()
    return [orjson.loads(line) for line in body.splitlines()]


def lineage_of(events: list[dict[str, Any]], job: str) -> dict[str, Any]:
    (event,) = [e for e in events if e["job"]["name"] == job]
    (output,) = event["outputs"]
    return output["facets"]["columnLineage"]


def edges(facet_body: dict[str, Any]) -> set[tuple[str | None, str, str, str, bool]]:
    """(output field or None, input field, type, subtype, masking) of every transformation."""
    found = set()
    for output_field, entry in facet_body["fields"].items():
        for ref in entry["inputFields"]:
            for t in ref["transformations"]:
                found.add((output_field, ref["field"], t["type"], t["subtype"], t["masking"]))
    for ref in facet_body.get("dataset", []):
        for t in ref["transformations"]:
            found.add((None, ref["field"], t["type"], t["subtype"], t["masking"]))
    return found


def test_a_producer_that_sends_only_sql_gets_column_lineage_with_explanations(
    db: Session, org: Organization
) -> None:
    store_events(db, org.id, [revenue_event()])
    before = exported(db, org.id)
    assert "columnLineage" not in before[0]["outputs"][0]["facets"]  # what the producer sent, before

    report = derive_organization(db, org.id)

    assert (report.jobs_with_sql, report.derived, report.failed) == (1, 1, 0)
    derived = lineage_of(exported(db, org.id), "revenue.build_customer_revenue")
    assert edges(derived) >= {
        ("customer_id", "customer_id", "DIRECT", "IDENTITY", False),
        ("email_hash", "email", "DIRECT", "TRANSFORMATION", True),
        ("revenue", "amount", "DIRECT", "AGGREGATION", False),
        ("orders", "order_id", "DIRECT", "AGGREGATION", True),
        (None, "customer_id", "INDIRECT", "JOIN", False),
        (None, "status", "INDIRECT", "FILTER", False),
        (None, "customer_id", "INDIRECT", "GROUP_BY", False),
    }
    refs = derived["fields"]["revenue"]["inputFields"]
    assert [(r["namespace"], r["name"]) for r in refs] == [(WAREHOUSE, "analytics.raw.orders")]
    (revenue,) = refs[0]["transformations"]
    assert "amount" in revenue["description"] and revenue["description"].endswith(DERIVED_MARK)
    for entry in derived["fields"].values():
        for ref in entry["inputFields"]:
            for t in ref["transformations"]:
                assert t["description"].endswith(DERIVED_MARK) and ref["field"] in t["description"]


def test_reported_lineage_is_kept_as_sent_and_only_the_gaps_are_filled(
    db: Session, org: Organization
) -> None:
    sent = column_lineage(
        # The producer reported one field, with a subtype of its own and no description.
        {
            "revenue": [
                input_field(
                    "analytics.raw.orders",
                    "amount",
                    {"type": "DIRECT", "subtype": "AGGREGATION"},
                    namespace=WAREHOUSE,
                )
            ]
        },
        dataset=[
            input_field(
                "analytics.raw.orders",
                "status",
                transformation("INDIRECT", "FILTER", "Paid orders only."),
                namespace=WAREHOUSE,
            )
        ],
    )
    store_events(db, org.id, [revenue_event(columnLineage=sent)])
    derive_organization(db, org.id)

    facet_body = lineage_of(exported(db, org.id), "revenue.build_customer_revenue")

    revenue = facet_body["fields"]["revenue"]["inputFields"]
    assert len(revenue) == 1 and revenue[0]["field"] == "amount"
    (kept,) = revenue[0]["transformations"]
    assert (kept["type"], kept["subtype"]) == ("DIRECT", "AGGREGATION") and "masking" not in kept
    # The producer sent no description: the one derived from the SQL fills it, marked as ours.
    assert "Sum" in kept["description"] and kept["description"].endswith(DERIVED_MARK)
    # The fields the producer did not report come from the SQL.
    assert {"customer_id", "email_hash", "orders"} <= set(facet_body["fields"])
    # The producer's dataset-level list is kept as sent, not extended.
    assert facet_body["dataset"] == [
        {
            "namespace": WAREHOUSE,
            "name": "analytics.raw.orders",
            "field": "status",
            "transformations": [
                {
                    "type": "INDIRECT",
                    "subtype": "FILTER",
                    "description": "Paid orders only.",
                    "masking": False,
                }
            ],
        }
    ]


def test_sql_that_does_not_parse_is_recorded_and_the_job_still_exports(
    db: Session, org: Organization
) -> None:
    store_events(
        db, org.id, [revenue_event(query="INSERT INTO analytics.marts.customer_revenue SELEC FROM (((")]
    )

    report = derive_organization(db, org.id)

    assert report.failed == 1
    assert derivation_counts(db, org.id).failed == 1
    (problem,) = derivation_problems(db, org.id)
    assert (
        problem.status == "failed" and problem.problems and problem.name == "revenue.build_customer_revenue"
    )
    (event,) = exported(db, org.id)
    assert event["job"]["facets"]["sql"]["query"].startswith("INSERT INTO")
    assert [d["name"] for d in event["inputs"]] == ["analytics.raw.orders", "analytics.raw.customers"]
    assert "columnLineage" not in event["outputs"][0]["facets"]


def test_a_changed_schema_or_sql_is_derived_again_and_nothing_else_is(db: Session, org: Organization) -> None:
    star = "INSERT INTO analytics.marts.customer_revenue SELECT * FROM raw.customers"
    event = revenue_event(query=star)
    event["outputs"][0]["facets"]["schema"] = schema(
        ("customer_id", "NUMBER"), ("email", "TEXT"), ("country", "TEXT")
    )
    store_events(db, org.id, [event])
    assert derive_organization(db, org.id).derived == 1
    assert {f for f in lineage_of(exported(db, org.id), "revenue.build_customer_revenue")["fields"]} == {
        "customer_id",
        "email",
        "country",
    }
    assert derive_organization(db, org.id).unchanged == 1  # nothing changed: nothing derived

    # The input gains a column (a DatasetEvent with the new schema): * now reaches it too.
    customers = dataset(
        "analytics.raw.customers",
        WAREHOUSE,
        schema=schema(("customer_id", "NUMBER"), ("email", "TEXT"), ("country", "TEXT"), ("segment", "TEXT")),
    )
    output = copy.deepcopy(event["outputs"][0])
    output["facets"]["schema"] = schema(
        ("customer_id", "NUMBER"), ("email", "TEXT"), ("country", "TEXT"), ("segment", "TEXT")
    )
    later = {
        **event,
        "eventTime": "2026-11-30T11:00:00Z",
        "inputs": [event["inputs"][0], customers],
        "outputs": [output],
    }
    store_events(db, org.id, [later])

    report = derive_organization(db, org.id)

    assert (report.derived, report.unchanged) == (1, 0)
    assert "segment" in lineage_of(exported(db, org.id), "revenue.build_customer_revenue")["fields"]


def test_tables_of_a_job_without_declared_datasets_are_derived_in_the_jobs_namespace(
    db: Session, org: Organization
) -> None:
    event = run_event(
        job="adhoc.copy_orders",
        namespace="scheduled-queries",
        job_facets=_sql(
            "INSERT INTO marts.orders_copy (id, amount) SELECT id, amount * 2 FROM raw.orders", "postgres"
        ),
    )
    store_events(db, org.id, [event])

    derive_organization(db, org.id)

    (exported_event,) = exported(db, org.id)
    assert [(d["namespace"], d["name"]) for d in exported_event["inputs"]] == [
        ("scheduled-queries", "raw.orders")
    ]
    assert [(d["namespace"], d["name"]) for d in exported_event["outputs"]] == [
        ("scheduled-queries", "marts.orders_copy")
    ]
    facet_body = exported_event["outputs"][0]["facets"]["columnLineage"]
    assert edges(facet_body) >= {
        ("id", "id", "DIRECT", "IDENTITY", False),
        ("amount", "amount", "DIRECT", "TRANSFORMATION", False),
    }


def test_derived_lineage_survives_an_export_import_round_trip_unchanged(
    db: Session, org: Organization
) -> None:
    store_events(db, org.id, [revenue_event()])
    derive_organization(db, org.id)
    first = exported(db, org.id)
    assert "columnLineage" in first[0]["outputs"][0]["facets"]

    other = make_org(db, "globex")
    body = b"".join(orjson.dumps(event) + b"\n" for event in first)
    assert import_events(db, other.id, io.BytesIO(body)).rejected == 0
    derive_organization(db, other.id)  # finds nothing missing: the file carries all of it

    assert exported(db, other.id) == first


def test_the_export_with_derived_lineage_validates_against_the_official_schemas(
    db: Session, org: Organization, tmp_path: Path
) -> None:
    store_events(db, org.id, [revenue_event()])
    derive_organization(db, org.id)
    lines = [orjson.dumps(event) for event in exported(db, org.id)]
    assert problems_of_file(lines) == []
    if VALIDATOR.exists():  # the shared validator too, where the machine has it
        path = tmp_path / "openlineage-events.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        result = subprocess.run(
            [sys.executable, str(VALIDATOR), str(path), "--strict", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_organizations_whose_graph_changed_get_one_derivation_job(
    settings: Settings, db: Session, org: Organization
) -> None:
    from redis import Redis
    from rq import Queue

    quiet = make_org(db, "quiet")  # no SQL at all: never due
    assert quiet.id not in organizations_due(db)
    store_events(db, org.id, [revenue_event()])
    assert organizations_due(db) == [org.id]

    assert enqueue_due_derivations(settings) == 1
    assert enqueue_due_derivations(settings) == 0  # one in flight per organization
    queue = Queue(settings.derive_queue, connection=Redis.from_url(settings.redis_url))
    assert queue.job_ids == [derive_job_id(org.id)]

    report = derive_organization_now(settings, org.id)  # what the worker's job does
    assert report.derived == 1
    db.rollback()
    # Changes of the last few minutes are looked at again (their transactions may commit late)...
    assert organizations_due(db) == [org.id]
    assert derive_organization_now(settings, org.id).derived == 0  # ...and cost a look, nothing more
    # Once they have settled, the organization is not due until something changes again.
    derive_organization_now(settings, org.id, settle=timedelta(0))
    db.rollback()
    assert organizations_due(db) == []
    store_events(db, org.id, [revenue_event(time="2026-11-30T12:00:00Z", query=REVENUE_SQL + " -- v2")])
    assert organizations_due(db) == [org.id]
    queue.empty()


def test_each_organization_is_compared_with_its_own_watermark(settings: Settings, db: Session) -> None:
    alpha, beta, gamma = make_org(db, "alpha"), make_org(db, "beta"), make_org(db, "gamma")
    for organization in (alpha, beta, gamma):
        store_events(db, organization.id, [revenue_event()])
    for organization in (alpha, beta):
        derive_organization_now(settings, organization.id, settle=timedelta(0))
    db.rollback()
    assert organizations_due(db) == [gamma.id]  # beta and alpha are derived; gamma never was

    store_events(db, beta.id, [revenue_event(time="2026-11-30T12:00:00Z", query=REVENUE_SQL + " -- v2")])
    assert organizations_due(db) == [beta.id, gamma.id]


def test_a_change_committed_after_the_pass_read_the_graph_is_derived_by_the_next_pass(
    settings: Settings, db: Session, org: Organization
) -> None:
    store_events(db, org.id, [revenue_event()])
    derive_organization_now(settings, org.id, settle=timedelta(0))
    # An ingest transaction that took its updated_at before the next pass, and commits after it.
    late = session_factory(settings.database_url)()
    try:
        newer_sql = revenue_event(time="2026-11-30T13:00:00Z", query=REVENUE_SQL.replace("SUM", "MAX"))
        apply_event(late, org.id, check_event(newer_sql))  # not committed yet
        # A later change to another job, committed (it shares no row with the uncommitted one).
        other = run_event(job="revenue.another_job", time="2026-11-30T14:00:00Z", job_facets=_sql("SELECT 1"))
        store_events(db, org.id, [other])
        derive_organization_now(settings, org.id)  # reads the graph before the late commit
        late.commit()
    finally:
        late.close()

    derive_organization_now(settings, org.id)

    revenue = lineage_of(exported(db, org.id), "revenue.build_customer_revenue")["fields"]["revenue"]
    assert revenue["inputFields"][0]["transformations"][0]["description"].startswith("Maximum of `amount`")


def test_two_passes_over_one_organization_at_once_take_turns(
    settings: Settings, db: Session, org: Organization
) -> None:
    events = []
    for index in range(450):  # three pages of jobs
        event = revenue_event()
        event["job"]["name"] = f"revenue.job_{index:03d}"
        events.append(event)
    store_events(db, org.id, events)
    errors: list[BaseException] = []

    def one_pass() -> None:
        try:
            with session_factory(settings.database_url)() as session:
                derive_organization(session, org.id, force=True)
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert derivation_counts(db, org.id).derived == 450
    assert len(exported(db, org.id)) == 450


def test_another_engine_revision_derives_every_job_again(
    settings: Settings, db: Session, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_events(db, org.id, [revenue_event()])
    derive_organization_now(settings, org.id, settle=timedelta(0))
    db.rollback()
    assert organizations_due(db) == []

    from lineage_core.lineage import derivation_schedule, derivations

    monkeypatch.setattr(derivations, "ENGINE_REVISION", "2/next")
    monkeypatch.setattr(derivation_schedule, "ENGINE_REVISION", "2/next")
    assert organizations_due(db) == [org.id]
    assert derive_organization_now(settings, org.id).derived == 1


def test_the_cli_derives_now_and_lists_what_could_not_be_derived(
    app: Flask, db: Session, org: Organization
) -> None:
    good = revenue_event()
    bad = revenue_event(query="SELECT FROM WHERE (")
    bad["job"]["name"] = "revenue.broken"
    store_events(db, org.id, [good, bad])

    result = app.test_cli_runner().invoke(args=["lineage", "derive", "--org", org.slug])

    assert result.exit_code == 0, result.output
    assert "Derived 2 of 2 jobs with SQL" in result.stdout and "1 failed" in result.stdout
    assert "failed airflow-prod/revenue.broken:" in result.stderr
    again = app.test_cli_runner().invoke(args=["lineage", "derive", "--org", org.slug])
    assert "Derived 0 of 2 jobs with SQL" in again.stdout and "2 unchanged" in again.stdout


def test_operators_see_what_could_not_be_derived_on_ops_and_in_metrics(
    client: FlaskClient, operator: User, db: Session, org: Organization
) -> None:
    bad = revenue_event(query="SELECT FROM WHERE (")
    waiting = revenue_event()
    waiting["job"]["name"] = "revenue.not_yet"
    store_events(db, org.id, [bad])
    derive_organization(db, org.id)
    store_events(db, org.id, [waiting])  # stored after the derivation ran: not derived yet
    login(client, operator.email)

    html = client.get("/ops/").get_data(as_text=True)
    metrics = client.get("/metrics").get_data(as_text=True)

    assert "0 jobs derived, 0 partly derived,\n  1 whose SQL could not be derived, 1 not derived yet." in html
    assert f"<td>{org.slug}</td><td>0</td>" in html
    assert 'olx_lineage_derivations{status="failed"} 1.0' in metrics
    assert 'olx_lineage_derivations{status="waiting"} 1.0' in metrics


@pytest.mark.slow  # starts a worker process
def test_a_worker_derives_an_organization_the_periodic_check_enqueued(
    settings: Settings, db: Session, org: Organization, tmp_path: Path
) -> None:
    store_events(db, org.id, [revenue_event()])
    assert enqueue_due_derivations(settings) == 1
    log = tmp_path / "worker.log"

    with running_process(settings, "worker", log):
        deadline = time.monotonic() + 120
        while derivation_counts(db, org.id).derived == 0 and time.monotonic() < deadline:
            db.rollback()
            time.sleep(0.1)

    assert derivation_counts(db, org.id).derived == 1, log.read_text()[-3000:]
    db.rollback()
    assert derive_organization_now(settings, org.id).derived == 0  # the job derived it all
    assert "columnLineage" in exported(db, org.id)[0]["outputs"][0]["facets"]


def test_a_description_is_filled_only_from_a_derived_edge_of_the_same_kind(
    db: Session, org: Organization
) -> None:
    # The producer calls revenue ← amount an IDENTITY; the SQL makes it an AGGREGATION: a different kind,
    # so the derived "Sum of …" does not describe the producer's edge.
    sent = column_lineage(
        {
            "revenue": [
                input_field(
                    "analytics.raw.orders",
                    "amount",
                    {"type": "DIRECT", "subtype": "IDENTITY"},
                    namespace=WAREHOUSE,
                )
            ]
        }
    )
    store_events(db, org.id, [revenue_event(columnLineage=sent)])
    derive_organization(db, org.id)

    (kept,) = lineage_of(exported(db, org.id), "revenue.build_customer_revenue")["fields"]["revenue"][
        "inputFields"
    ]
    assert kept["transformations"] == [{"type": "DIRECT", "subtype": "IDENTITY"}]
