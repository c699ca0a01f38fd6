"""The conformance check the export tests rely on (tests/openlineage_spec.py) catches what it must."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lineage_core.demo.synthetic import iter_synthetic_events
from tests.openlineage_spec import problems_of_event

EVENT = next(iter_synthetic_events(3, seed=4))


def _with(change: Any) -> dict[str, Any]:
    event = copy.deepcopy(EVENT)
    change(event)
    return event


def _first_input_field(event: dict[str, Any]) -> Any:
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    return next(iter(fields.values()))["inputFields"][0]


def test_a_synthetic_event_conforms() -> None:
    assert problems_of_event(EVENT) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda e: e.update(eventTime="yesterday"), "eventTime"),
        (lambda e: e["run"].update(runId="not-a-uuid"), "run.runId"),
        (lambda e: e["outputs"][0]["facets"]["schema"]["fields"][0].update(name=None), "schema"),
        (lambda e: e["job"]["facets"]["sql"].update(_schemaURL="https://example.com/x.json"), "_schemaURL"),
        (
            lambda e: e["job"]["facets"].update(madeUp={"_producer": "https://x", "_schemaURL": "https://x"}),
            "madeUp",
        ),
        (lambda e: _first_input_field(e).update(name="not.an.input"), "not one of the inputs"),
        (lambda e: _first_input_field(e)["transformations"][0].update(type="COPY"), "transformation type"),
    ],
)
def test_each_kind_of_problem_is_reported(change: Any, expected: str) -> None:
    problems = problems_of_event(_with(change))
    assert any(expected in problem for problem in problems), problems
