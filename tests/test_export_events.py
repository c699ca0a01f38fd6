"""Building the export's RunEvents from the store's dataclasses (no database, no AWS)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from lineage_core.export.events import (
    EVENT_SCHEMA_URL,
    PRODUCER,
    TRIM_STEPS,
    EventWriter,
    format_event_time,
    snapshot_run_id,
)
from lineage_core.lineage.graph import (
    InputDataset,
    JobLineage,
    OutputDataset,
    dataset_field,
    input_field,
    transformation,
)
from tests.readback import load_with_openlineage_classes

SNAPSHOT = datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC)
PG = "postgres://orders-db.internal:5432"
SF = "snowflake://acme-analytics"

ORDERS = InputDataset(
    PG,
    "shop.public.orders",
    "Operational orders table.",
    (
        dataset_field("order_id", "BIGINT", "Unique identifier of the order."),
        dataset_field("amount", "NUMERIC(12,2)", None),
        dataset_field("address.city", None, "City, from the nested address struct."),
    ),
)
CUSTOMERS = InputDataset(PG, "shop.public.customers", None, ())
IDENTITY = transformation("DIRECT", "IDENTITY", False, "Copied unchanged from orders.order_id.")
SUM = transformation("DIRECT", "AGGREGATION", None, "SUM of amount per order.")
JOIN = transformation("INDIRECT", "JOIN", False, "Join key: orders.customer_id = customers.id.")
MART = OutputDataset(
    SF,
    "ANALYTICS.MARTS.FCT_ORDERS",
    "Orders per customer.",
    (dataset_field("order_id", "NUMBER(38,0)", "The order."), dataset_field("total", "NUMBER(12,2)", None)),
    {
        "order_id": {"inputFields": [input_field(PG, "shop.public.orders", "order_id", [IDENTITY])]},
        "total": {
            "inputFields": [
                input_field(PG, "shop.public.orders", "amount", [SUM, transformation("INDIRECT", "X")]),
                input_field(PG, "shop.public.customers", "id"),
            ]
        },
    },
    [input_field(PG, "shop.public.customers", "id", [JOIN])],
)
JOB = JobLineage(
    id=1,
    namespace="dbt-analytics",
    name="analytics.fct_orders",
    description="Builds the orders mart.",
    sql="INSERT INTO fct_orders SELECT ...",
    sql_dialect="snowflake",
    processing_type="BATCH",
    integration="DBT",
    job_type="MODEL",
    lineage_event_time=datetime(2026, 1, 1, tzinfo=UTC),
    inputs=(ORDERS, CUSTOMERS),
    outputs=(MART,),
)
BARE_JOB = JobLineage(
    id=2,
    namespace="airflow-prod",
    name="cleanup",
    description=None,
    sql=None,
    sql_dialect=None,
    processing_type=None,
    integration=None,
    job_type=None,
    lineage_event_time=None,
    inputs=(),
    outputs=(),
)


def facet_urls(*names: tuple[str, str]) -> dict[str, str]:
    return {
        name: f"https://openlineage.io/spec/facets/{version}/{schema}.json#/$defs/{schema}"
        for name, (version, schema) in names
    }


def walk(value: Any) -> list[Any]:
    """Every value nested in ``value``."""
    found = [value]
    if isinstance(value, dict):
        for item in value.values():
            found += walk(item)
    elif isinstance(value, list):
        for item in value:
            found += walk(item)
    return found


def test_a_job_becomes_one_complete_run_event_with_every_facet() -> None:
    event = EventWriter(SNAPSHOT).event(JOB)

    assert event["eventType"] == "COMPLETE"
    assert event["eventTime"] == "2026-03-04T05:06:07.891Z"
    assert event["producer"] == PRODUCER
    assert event["schemaURL"] == EVENT_SCHEMA_URL
    assert event["run"] == {"runId": snapshot_run_id(SNAPSHOT, JOB.namespace, JOB.name), "facets": {}}
    assert event["job"] == {
        "namespace": "dbt-analytics",
        "name": "analytics.fct_orders",
        "facets": {
            "documentation": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/DocumentationJobFacet.json"
                "#/$defs/DocumentationJobFacet",
                "description": "Builds the orders mart.",
            },
            "sql": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
                "query": "INSERT INTO fct_orders SELECT ...",
                "dialect": "snowflake",
            },
            "jobType": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json"
                "#/$defs/JobTypeJobFacet",
                "processingType": "BATCH",
                "integration": "DBT",
                "jobType": "MODEL",
            },
        },
    }
    orders, customers = event["inputs"]
    assert orders["facets"]["schema"]["fields"] == [
        {"name": "order_id", "type": "BIGINT", "description": "Unique identifier of the order."},
        {"name": "amount", "type": "NUMERIC(12,2)"},
        # No producer ever sent a type: consumers such as Marquez require one, so it says so.
        {"name": "address.city", "type": "UNKNOWN", "description": "City, from the nested address struct."},
    ]
    assert orders["facets"]["documentation"]["description"] == "Operational orders table."
    assert customers == {"namespace": PG, "name": "shop.public.customers", "facets": {}}

    (mart,) = event["outputs"]
    assert set(mart["facets"]) == {"schema", "documentation", "columnLineage"}
    lineage = mart["facets"]["columnLineage"]
    assert lineage["fields"] == {
        "order_id": {
            "inputFields": [
                {
                    "namespace": PG,
                    "name": "shop.public.orders",
                    "field": "order_id",
                    "transformations": [
                        {
                            "type": "DIRECT",
                            "subtype": "IDENTITY",
                            "description": "Copied unchanged from orders.order_id.",
                            "masking": False,
                        }
                    ],
                }
            ]
        },
        "total": {
            "inputFields": [
                {
                    "namespace": PG,
                    "name": "shop.public.orders",
                    "field": "amount",
                    "transformations": [
                        {
                            "type": "DIRECT",
                            "subtype": "AGGREGATION",
                            "description": "SUM of amount per order.",
                        },
                        {"type": "INDIRECT", "subtype": "X"},
                    ],
                },
                # The producer sent no transformations for this one.
                {"namespace": PG, "name": "shop.public.customers", "field": "id", "transformations": []},
            ]
        },
    }
    assert lineage["dataset"] == [
        {
            "namespace": PG,
            "name": "shop.public.customers",
            "field": "id",
            "transformations": [
                {
                    "type": "INDIRECT",
                    "subtype": "JOIN",
                    "description": "Join key: orders.customer_id = customers.id.",
                    "masking": False,
                }
            ],
        }
    ]
    urls = {name: f["_schemaURL"] for name, f in mart["facets"].items()}
    assert urls == facet_urls(
        ("schema", ("1-2-0", "SchemaDatasetFacet")),
        ("documentation", ("1-1-0", "DocumentationDatasetFacet")),
        ("columnLineage", ("1-2-0", "ColumnLineageDatasetFacet")),
    )
    facets = [v for v in walk(event) if isinstance(v, dict) and "_schemaURL" in v]
    assert len(facets) == 8  # job 3, orders 2, customers 0, mart 3
    assert all(f["_producer"] == PRODUCER for f in facets)


def test_nothing_unknown_is_written_as_null_and_inputs_outputs_are_always_there() -> None:
    full = EventWriter(SNAPSHOT).event(JOB)
    bare = EventWriter(SNAPSHOT).event(BARE_JOB)

    assert None not in walk(full)
    assert None not in walk(bare)
    assert bare["inputs"] == [] and bare["outputs"] == []
    assert bare["job"]["facets"] == {}


def test_job_type_facet_needs_processing_type_and_integration() -> None:
    half = replace(JOB, integration=None)
    without_job_type = replace(JOB, job_type=None, sql_dialect=None)

    assert "jobType" not in EventWriter(SNAPSHOT).event(half)["job"]["facets"]
    facets = EventWriter(SNAPSHOT).event(without_job_type)["job"]["facets"]
    assert "jobType" not in facets["jobType"]
    assert "dialect" not in facets["sql"]


def test_column_lineage_facet_with_only_dataset_dependencies_still_has_fields() -> None:
    output = replace(MART, column_lineage={})
    event = EventWriter(SNAPSHOT).event(replace(JOB, outputs=(output,)))

    assert event["outputs"][0]["facets"]["columnLineage"]["fields"] == {}
    no_lineage = replace(MART, column_lineage={}, dataset_dependencies=[])
    event = EventWriter(SNAPSHOT).event(replace(JOB, outputs=(no_lineage,)))
    assert "columnLineage" not in event["outputs"][0]["facets"]


def test_run_id_is_a_uuid7_deterministic_for_the_snapshot_and_the_job() -> None:
    run_id = uuid.UUID(snapshot_run_id(SNAPSHOT, "ns", "job"))

    assert run_id.version == 7
    assert run_id.variant == uuid.RFC_4122
    assert run_id.int >> 80 == int(SNAPSHOT.timestamp() * 1000)  # the time part is the snapshot time
    assert snapshot_run_id(SNAPSHOT, "ns", "job") == str(run_id)
    assert snapshot_run_id(SNAPSHOT.astimezone(), "ns", "job") == str(run_id)  # same instant, other zone
    others = {
        snapshot_run_id(SNAPSHOT, "ns", "other"),
        snapshot_run_id(SNAPSHOT, "other", "job"),
        snapshot_run_id(SNAPSHOT, "ns\x00job", ""),
        snapshot_run_id(SNAPSHOT + timedelta(microseconds=1), "ns", "job"),
    }
    assert str(run_id) not in others and len(others) == 4
    assert EventWriter(SNAPSHOT).event(JOB)["run"]["runId"] == snapshot_run_id(
        SNAPSHOT, JOB.namespace, JOB.name
    )


def test_event_time_is_utc_with_milliseconds() -> None:
    local = SNAPSHOT.astimezone(timezone(timedelta(hours=-5)))
    assert format_event_time(local) == "2026-03-04T05:06:07.891Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        EventWriter(datetime(2026, 1, 1))


def test_line_is_the_event_serialized_with_orjson_and_a_newline() -> None:
    writer = EventWriter(SNAPSHOT)
    lines = list(writer.lines([JOB, BARE_JOB, JOB]))

    assert lines[0] == orjson.dumps(EventWriter(SNAPSHOT).event(JOB)) + b"\n"
    assert lines[1] == orjson.dumps(EventWriter(SNAPSHOT).event(BARE_JOB)) + b"\n"
    assert lines[2] == lines[0]  # the second time, the datasets' cached facets are reused
    assert writer.stats.as_dict() == {"events": 3, "trimmed": 0, "omitted": 0}


def test_a_dataset_that_changed_is_never_served_from_the_cache() -> None:
    writer = EventWriter(SNAPSHOT)
    first = orjson.loads(writer.line(JOB) or b"")
    renamed = replace(ORDERS, fields=(dataset_field("order_id", "BIGINT", "Changed."),))
    described = replace(ORDERS, description="New description.")
    second = orjson.loads(writer.line(replace(JOB, inputs=(renamed,))) or b"")
    third = orjson.loads(writer.line(replace(JOB, inputs=(described,))) or b"")

    assert (
        first["inputs"][0]["facets"]["schema"]["fields"][0]["description"]
        == "Unique identifier of the order."
    )
    assert second["inputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "order_id", "type": "BIGINT", "description": "Changed."}
    ]
    assert third["inputs"][0]["facets"]["documentation"]["description"] == "New description."


def test_cache_stays_bounded() -> None:
    writer = EventWriter(SNAPSHOT, dataset_cache_size=3)
    jobs = [replace(JOB, name=f"job{i}", inputs=(replace(ORDERS, name=f"t{i}"),)) for i in range(10)]
    lines = list(writer.lines(jobs))

    assert len(writer._datasets._entries) == 3
    assert lines == [orjson.dumps(EventWriter(SNAPSHOT).event(j)) + b"\n" for j in jobs]


def test_every_event_loads_into_openlineage_python_classes() -> None:
    for job in (JOB, BARE_JOB):
        event = orjson.loads(EventWriter(SNAPSHOT).line(job) or b"")
        load_with_openlineage_classes(event)  # raises on anything the classes do not model


# The >300 KB rule ----------------------------------------------------------------------------------------

LONG = "x" * 2000


def wide_job(columns: int, inputs: int = 1) -> JobLineage:
    """A job whose datasets have many described columns, each with an explained lineage."""
    fields = tuple(dataset_field(f"c{i}", "VARCHAR", LONG) for i in range(columns))
    sources = tuple(InputDataset(PG, f"shop.public.src{n}", LONG, fields) for n in range(inputs))
    lineage = {
        f"c{i}": {
            "inputFields": [
                input_field(
                    PG, "shop.public.src0", f"c{i}", [transformation("DIRECT", "IDENTITY", False, LONG)]
                )
            ]
        }
        for i in range(columns)
    }
    output = OutputDataset(SF, "ANALYTICS.MARTS.WIDE", LONG, fields, lineage, [])
    return replace(JOB, sql="SELECT " + LONG * 10, inputs=sources, outputs=(output,))


def written(job: JobLineage, limit: int) -> tuple[dict[str, Any] | None, EventWriter]:
    writer = EventWriter(SNAPSHOT, max_event_bytes=limit)
    line = writer.line(job)
    if line is not None:
        assert len(line) - 1 <= limit
    return (orjson.loads(line) if line is not None else None), writer


def test_an_event_under_the_limit_is_untouched() -> None:
    job = wide_job(columns=3)
    full = orjson.dumps(EventWriter(SNAPSHOT).event(job))
    event, writer = written(job, limit=len(full))

    assert event == orjson.loads(full)
    assert writer.stats.trimmed == 0


def test_the_default_limit_is_300_000_bytes(caplog: pytest.LogCaptureFixture) -> None:
    job = wide_job(columns=60)  # ~2 KB of explanation per column, in and out: well over 300 KB
    assert len(orjson.dumps(EventWriter(SNAPSHOT, max_event_bytes=10**9).event(job))) > 300_000

    writer = EventWriter(SNAPSHOT)
    with caplog.at_level(logging.WARNING, logger="lineage_core.export.events"):
        line = writer.line(job)

    assert line is not None and len(line) - 1 <= 300_000
    assert writer.stats.as_dict() == {"events": 1, "trimmed": 1, "omitted": 0}
    assert "analytics.fct_orders" in caplog.text and "300000-byte limit" in caplog.text


def test_trimming_drops_detail_in_order_and_keeps_table_lineage() -> None:
    job = wide_job(columns=40, inputs=2)
    writer = EventWriter(SNAPSHOT, max_event_bytes=10**9)
    sizes = []
    for _step, detail in TRIM_STEPS:
        sizes.append(len(orjson.dumps(writer.event(job, detail))))
    assert sizes == sorted(sizes, reverse=True)  # each step makes the event smaller

    # Just under the size after step 1: the input facets go, then the SQL too.
    event, _ = written(job, sizes[0] - 1)
    assert event is not None
    assert [i["facets"] for i in event["inputs"]] == [{}, {}]
    assert "sql" not in event["job"]["facets"] and "documentation" in event["job"]["facets"]
    assert "columnLineage" in event["outputs"][0]["facets"]

    # Just under the size after step 3: descriptions and explanations go, column lineage stays.
    event, _ = written(job, sizes[3])
    assert event is not None
    out = event["outputs"][0]["facets"]
    assert "documentation" not in out and "documentation" not in event["job"]["facets"]
    assert all("description" not in f for f in out["schema"]["fields"])
    transformation = out["columnLineage"]["fields"]["c0"]["inputFields"][0]["transformations"][0]
    assert transformation == {"type": "DIRECT", "subtype": "IDENTITY", "masking": False}
    # The job's own column lineage, shared with the full events, is left as it was.
    assert job.outputs[0].column_lineage["c0"]["inputFields"][0]["transformations"][0]["description"] == LONG

    # Smallest: table-level lineage only, and still the same job, inputs and outputs.
    event, writer = written(job, sizes[-1])
    assert event is not None
    assert event["outputs"][0]["facets"] == {}
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
        (PG, "shop.public.src0"),
        (PG, "shop.public.src1"),
    ]
    assert event["job"]["facets"] == {"jobType": event["job"]["facets"]["jobType"]}
    assert writer.stats.trimmed == 1


def test_a_job_too_large_even_without_facets_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    many_inputs = replace(
        BARE_JOB, inputs=tuple(InputDataset(PG, f"shop.public.t{i}", None, ()) for i in range(100))
    )
    writer = EventWriter(SNAPSHOT, max_event_bytes=2000)

    with caplog.at_level(logging.WARNING, logger="lineage_core.export.events"):
        lines = list(writer.lines([BARE_JOB, many_inputs, BARE_JOB]))

    assert len(lines) == 2
    assert writer.stats.as_dict() == {"events": 2, "trimmed": 0, "omitted": 1}
    assert writer.stats.omitted_jobs == ["airflow-prod/cleanup"]
    assert "left out of the export" in caplog.text
