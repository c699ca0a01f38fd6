"""Checking incoming events: every bad input is rejected with the field and the problem named."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from lineage_core.lineage.event import DELETED, EventKind, EventType, Field
from lineage_core.lineage.parse import EventError, check_event, parse_event
from tests.factories import dataset, documentation, facet, orders_event, run_event, schema

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def problems_of(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(EventError) as caught:
        check_event(data, now=NOW)
    return [(p.field, p.code) for p in caught.value.problems]


def with_change(path: list[Any], value: Any, delete: bool = False) -> dict[str, Any]:
    event = copy.deepcopy(orders_event())
    target = event
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return event


def test_a_complete_event_is_read_with_everything_the_store_keeps() -> None:
    event = check_event(orders_event(), now=NOW)
    assert event.kind is EventKind.RUN
    assert event.event_type is EventType.COMPLETE
    assert event.event_time == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert event.job is not None and event.job.sql is not None
    assert (event.job.sql.query, event.job.sql.dialect) == (
        "INSERT INTO shop.marts.orders SELECT ...",
        "postgres",
    )
    assert event.job.job_type is not None and event.job.job_type.integration == "AIRFLOW"
    output = event.outputs[0]
    assert output.documentation == "Orders with customer e-mail hashes."
    assert output.schema == (
        Field("order_id", "BIGINT", "Order id"),
        Field("total", "NUMERIC", None),
        Field("email_hash", "TEXT", None),
    )
    assert output.column_lineage is not None
    email = dict(output.column_lineage.fields)["email_hash"][0]
    assert (email.name, email.field, email.transformations[0].masking) == (
        "shop.public.customers",
        "email",
        True,
    )
    assert output.column_lineage.dataset[0].transformations[0].subtype == "JOIN"
    assert event.carries_lineage


def test_job_and_dataset_events_are_recognised() -> None:
    job_event = run_event(event_type=None)
    del job_event["run"]
    assert check_event(job_event, now=NOW).kind is EventKind.JOB
    dataset_event = {
        "eventTime": "2024-05-01T12:00:00Z",
        "producer": "https://example.com",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": dataset("shop.public.orders", documentation=documentation("Orders.")),
    }
    parsed = check_event(dataset_event, now=NOW)
    assert parsed.kind is EventKind.DATASET
    assert parsed.dataset is not None and parsed.dataset.documentation == "Orders."


@pytest.mark.parametrize(
    ("raw", "moment"),
    [
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T14:00:00.5+02:00", datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2024-05-01T12:00:00.123456789Z", datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)),  # Java: ns
        ("2024-05-01 07:00:00-0500", datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ],
)
def test_event_times_with_an_offset_are_read_as_utc(raw: str, moment: datetime) -> None:
    assert check_event(run_event(time=raw), now=NOW).event_time == moment


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        # missing required fields
        (with_change(["eventTime"], None, delete=True), [("eventTime", "missing_field")]),
        (with_change(["producer"], None, delete=True), [("producer", "missing_field")]),
        (with_change(["schemaURL"], None, delete=True), [("schemaURL", "missing_field")]),
        (with_change(["run", "runId"], None, delete=True), [("run.runId", "missing_field")]),
        (with_change(["job", "name"], None, delete=True), [("job.name", "missing_field")]),
        (
            with_change(["inputs", 0, "namespace"], None, delete=True),
            [("inputs[0].namespace", "missing_field")],
        ),
        (
            with_change(["job", "facets", "sql", "query"], None, delete=True),
            [("job.facets.sql.query", "missing_field")],
        ),
        (
            with_change(
                ["outputs", 0, "facets", "columnLineage", "fields", "total", "inputFields", 0, "field"], 1
            ),
            [("outputs[0].facets.columnLineage.fields.total.inputFields[0].field", "wrong_type")],
        ),
        # wrong types
        (with_change(["eventTime"], 1714564800), [("eventTime", "wrong_type")]),
        (with_change(["run"], "abc"), [("run", "wrong_type")]),
        (with_change(["job", "namespace"], ["a"]), [("job.namespace", "wrong_type")]),
        (with_change(["inputs"], {"namespace": "x"}), [("inputs", "wrong_type")]),
        (with_change(["outputs", 0], "shop.marts.orders"), [("outputs[0]", "wrong_type")]),
        (
            with_change(["outputs", 0, "facets", "schema", "fields", 1, "type"], 5),
            [("outputs[0].facets.schema.fields[1].type", "wrong_type")],
        ),
        (
            with_change(["outputs", 0, "facets", "documentation"], "text"),
            [("outputs[0].facets.documentation", "wrong_type")],
        ),
        (
            with_change(
                [
                    "outputs",
                    0,
                    "facets",
                    "columnLineage",
                    "fields",
                    "total",
                    "inputFields",
                    0,
                    "transformations",
                    0,
                ],
                {"type": "DIRECT", "masking": "no"},
            ),
            [
                (
                    "outputs[0].facets.columnLineage.fields.total.inputFields[0].transformations[0].masking",
                    "wrong_type",
                )
            ],
        ),
        # values
        (with_change(["run", "runId"], "not-a-uuid"), [("run.runId", "invalid_value")]),
        (with_change(["run", "runId"], "0190b6f24e3c7b8a9d2e5f6a7b8c9d0e"), [("run.runId", "invalid_value")]),
        (with_change(["eventTime"], "2024-05-01T12:00:00"), [("eventTime", "invalid_value")]),
        (with_change(["eventTime"], "2024-05-01"), [("eventTime", "invalid_value")]),
        (with_change(["eventTime"], "2024-02-30T12:00:00Z"), [("eventTime", "invalid_value")]),
        (with_change(["eventTime"], "2031-01-01T00:00:00Z"), [("eventTime", "invalid_value")]),  # clock skew
        (with_change(["eventType"], "FINISHED"), [("eventType", "invalid_value")]),
        (with_change(["job", "name"], "  "), [("job.name", "invalid_value")]),
        (with_change(["job", "name"], "etl\x00orders"), [("job.name", "invalid_value")]),
        (with_change(["job", "namespace"], "n" * 513), [("job.namespace", "too_long")]),
        (
            with_change(
                [
                    "outputs",
                    0,
                    "facets",
                    "columnLineage",
                    "fields",
                    "total",
                    "inputFields",
                    0,
                    "transformations",
                    0,
                ],
                {"type": "direct"},
            ),
            [
                (
                    "outputs[0].facets.columnLineage.fields.total.inputFields[0].transformations[0].type",
                    "invalid_value",
                )
            ],
        ),
        (
            with_change(["outputs", 0, "facets", "schema"], schema(("id", "INT"), ("id", "BIGINT"))),
            [("outputs[0].facets.schema.fields[1].name", "invalid_value")],
        ),
    ],
)
def test_bad_input_names_the_field(event: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert problems_of(event) == expected


def test_an_event_with_an_event_type_but_no_run_is_a_run_event_missing_its_run() -> None:
    event = orders_event()
    del event["run"]
    assert problems_of(event) == [("run", "missing_field")]


def test_a_document_that_is_no_event_says_so() -> None:
    assert problems_of([orders_event()]) == [("event", "wrong_type")]
    assert problems_of({"eventTime": "2024-05-01T12:00:00Z", "producer": "p", "schemaURL": "s"}) == [
        ("job", "missing_field")
    ]


def test_malformed_json_is_reported_for_the_body() -> None:
    with pytest.raises(EventError) as caught:
        parse_event(b'{"eventType": "START",')
    problem = caught.value.problems[0]
    assert (problem.field, problem.code) == ("body", "malformed_json")
    assert "not valid JSON" in problem.message


def test_every_problem_is_listed_with_a_sentence() -> None:
    event = orders_event()
    event["run"]["runId"] = "42"
    event["eventTime"] = "yesterday"
    del event["job"]["namespace"]
    with pytest.raises(EventError) as caught:
        check_event(event, now=NOW)
    by_field = {p.field: p.message for p in caught.value.problems}
    assert set(by_field) == {"eventTime", "run.runId", "job.namespace"}
    assert by_field["run.runId"] == (
        "run.runId '42' is not a UUID such as '0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e'."
    )
    assert "RFC 3339" in by_field["eventTime"]
    assert by_field["job.namespace"] == "job.namespace is required."


def test_timestamp_without_offset_explains_what_to_add() -> None:
    with pytest.raises(EventError, match=r"has no UTC offset.*'Z'"):
        check_event(run_event(time="2024-05-01T12:00:00.000"), now=NOW)


def test_problems_are_capped_so_a_huge_bad_event_costs_little() -> None:
    event = run_event(inputs=[{"namespace": 1, "name": 2} for _ in range(500)])
    with pytest.raises(EventError) as caught:
        check_event(event, now=NOW)
    assert len(caught.value.problems) == 20


def test_field_names_with_dots_are_quoted_in_paths() -> None:
    event = orders_event()
    lineage = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    lineage["a.b"] = {"inputFields": "x"}
    assert problems_of(event) == [('outputs[0].facets.columnLineage.fields["a.b"].inputFields', "wrong_type")]


def test_nested_schema_fields_are_flattened_with_dotted_names() -> None:
    nested = facet(
        {
            "fields": [
                {"name": "id", "type": "INT", "fields": []},
                {"name": "address", "type": "STRUCT", "fields": [{"name": "city", "type": "STRING"}]},
            ]
        }
    )
    event = check_event(run_event(outputs=[dataset("t", schema=nested)]), now=NOW)
    assert event.outputs[0].schema == (
        Field("id", "INT", None),
        Field("address", "STRUCT", None),
        Field("address.city", "STRING", None),
    )


def test_deleted_facets_are_marked_not_read() -> None:
    event = run_event(
        outputs=[dataset("t", schema={"_deleted": True}, documentation={"_deleted": True})],
        job_facets={"sql": {"_deleted": True}},
    )
    parsed = check_event(event, now=NOW)
    assert parsed.outputs[0].schema is DELETED
    assert parsed.outputs[0].documentation is DELETED
    assert parsed.job is not None and parsed.job.sql is DELETED


def test_unknown_facets_are_ignored_and_legacy_events_without_event_type_are_accepted() -> None:
    event = run_event(event_type=None, job_facets={"ownership": {"owners": 5}})
    parsed = check_event(event, now=NOW)
    assert parsed.event_type is None
    assert parsed.kind is EventKind.RUN


@pytest.mark.parametrize(
    ("event_type", "inputs", "carries"),
    [
        ("START", [], False),
        ("START", [dataset("a")], True),
        ("FAIL", [dataset("a")], False),
        ("ABORT", [dataset("a")], False),
        ("RUNNING", [dataset("a")], True),
        ("OTHER", [], False),
    ],
)
def test_which_events_carry_lineage(event_type: str, inputs: list[Any], carries: bool) -> None:
    assert check_event(run_event(event_type=event_type, inputs=inputs), now=NOW).carries_lineage is carries


def test_bodies_are_parsed_from_bytes() -> None:
    run_id = str(uuid.uuid4())
    event = parse_event(orjson.dumps(run_event(run_id=run_id)), now=NOW)
    assert str(event.run_id) == run_id
