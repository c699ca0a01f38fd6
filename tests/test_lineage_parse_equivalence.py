"""The fast validator gives what the old one gave: the same Event, or the same problems in the same order.

``bench/parse_baseline.py`` is the validator as it was before the msgspec fast path. Both read random
mutations of valid events (wrong types, missing and extra keys, nulls, huge and negative numbers,
unicode, blank and over-long strings, nested facet junk, duplicate keys, raw JSON oddities) from the same
bytes, str and decoded dicts, and must answer alike.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from bench import parse_baseline as baseline
from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.lineage import parse
from lineage_core.lineage.event import Event
from lineage_core.lineage.fast_path import read_valid_event
from tests.factories import dataset, documentation, facet, feature_events, orders_event, run_event, schema

NOW = datetime(2026, 1, 2, tzinfo=UTC)  # after the synthetic events' 2026-01-01, as after the factories'


def _nested_schema(depth: int) -> dict[str, Any]:
    """A schema whose first field nests ``depth`` levels of struct fields (the checker allows 32)."""
    innermost: dict[str, Any] = {"name": "leaf", "type": "STRING"}
    for level in range(depth):
        innermost = {"name": f"level{level}", "type": "STRUCT", "fields": [innermost]}
    return facet({"fields": [innermost, {"name": "flat", "type": "INT"}]}, "SchemaDatasetFacet")


def _job_event() -> dict[str, Any]:
    event = orders_event()
    del event["run"], event["eventType"]
    return event


def _dataset_event() -> dict[str, Any]:
    return {
        "eventTime": "2024-05-01T12:00:00.5+02:00",
        "producer": "https://example.com",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": dataset(
            "shop.public.orders",
            schema=schema(("id", "BIGINT", "Order id")),
            documentation=documentation("Orders."),
        ),
    }


def _deleted_facets_event() -> dict[str, Any]:
    return run_event(
        outputs=[
            dataset("t", schema={"_deleted": True}, documentation={"_deleted": True}),
            dataset("u", columnLineage={"_deleted": True}),
        ],
        job_facets={"sql": {"_deleted": True}, "jobType": {"_deleted": True}},
    )


def _orders_event_with_every_container() -> dict[str, Any]:
    """orders_event() plus the objects the checker only type-checks, and a nested schema field."""
    event = orders_event()
    event["run"]["facets"] = {"parent": facet({"job": {"name": "dag"}})}
    event["inputs"][0]["inputFacets"] = {"dataQuality": facet({"rowCount": 5})}
    event["outputs"][0]["outputFacets"] = {"outputStatistics": facet({"rowCount": 5})}
    event["outputs"][0]["facets"]["schema"]["fields"][0]["ordinal_position"] = 1
    event["inputs"][1]["facets"]["schema"]["fields"].append(
        {"name": "address", "type": "STRUCT", "fields": [{"name": "city", "type": "TEXT"}]}
    )
    return event


BASES: list[dict[str, Any]] = [
    _orders_event_with_every_container(),
    _job_event(),
    _dataset_event(),
    _deleted_facets_event(),
    run_event(event_type=None, outputs=[dataset("deep", schema=_nested_schema(31))]),
    *feature_events(jobs=2, seed=5),
]

KEYS = [
    "eventTime", "eventType", "producer", "schemaURL", "run", "runId", "job", "inputs", "outputs",
    "dataset", "namespace", "name", "facets", "inputFacets", "outputFacets", "schema", "fields", "type",
    "description", "ordinal_position", "documentation", "columnLineage", "inputFields", "field",
    "transformations", "subtype", "masking", "sql", "query", "dialect", "jobType", "processingType",
    "integration", "_deleted",
]  # fmt: skip
SPECIAL_STRINGS = [
    "", " ", "\t\n", "\u00a0", "\u2003", "\u3000x", "x\x00y", "\x00", "😀", "ö", "a.b", "n" * 513,
    "n" * 1025, "l" * 200, "l" * 201, "😀" * 201, "DIRECT", "INDIRECT", "direct", "START", "COMPLETE",
    "FAIL", "finished", str(uuid.uuid4()), uuid.uuid4().hex, "2024-05-01T12:00:00Z",
    "2024-05-01T12:00:00", "2024-05-01T12:00:00.123456789-05:00", "2024-02-30T00:00:00Z",
    "2099-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
    "2024-05-01T12:00:00+25:00", "٢٠٢٤-05-01T12:00:00Z", "2024-05-01T12:00:00Z\n", "\\u0000",
]  # fmt: skip
SPECIAL_NUMBERS = [
    0, -1, 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -(10**30),
    1.0, -0.0, 0.5, 1e308, -1e308, 5e-324,
]  # fmt: skip
# JSON text that no Python value serializes to: numbers beyond a double, broken UTF-8 and surrogates,
# NULs in ignored places, nesting beyond the parser's depth limit, duplicate keys.
RAW_SNIPPETS = [
    b"1e400", b"-1e400", b"1" + b"0" * 400, b"123456789012345678901234567890", b"-0", b"1E+2",
    b'"\\ud800"', b'"\\udc00x"', b'"\xff"', b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\\u0000"', b'"a\\\\u0000"',
    b"[" * 1100 + b"]" * 1100, b"[" * 300 + b"]" * 300, b'{"a": 1, "a": [2]}', b"null",
]  # fmt: skip
# Weighted: "text" keeps a string a string, so the value rules get as much exercise as the type rules.
ACTIONS = ["text", "text", "text", "replace", "replace", "delete", "add", "rekey", "grow", "shrink"]
ACTIONS += ["delete_facet", "root"]
RAW_MARK = "@@raw@@"
DUPLICATE_MARK = "@@duplicate@@"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(SPECIAL_NUMBERS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(SPECIAL_STRINGS),
    st.text(max_size=6),
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def outcome(read: Callable[..., Any], document: Any) -> Any:
    """What a validator answers: the Event, or the error's class and every problem, in order."""
    try:
        return read(document, now=NOW)
    except (parse.EventError, baseline.EventError) as error:
        return (type(error).__name__, [(p.field, p.code, p.message) for p in error.problems])


def assert_same_answer(document: Any) -> None:
    """Both validators answer ``document`` (JSON text in any form orjson reads, or a dict) alike."""
    text = isinstance(document, bytes | bytearray | memoryview | str)
    expected = outcome(baseline.parse_event if text else baseline.check_event, document)
    got = outcome(parse.parse_event if text else parse.check_event, document)
    assert got == expected
    assert repr(got) == repr(expected)  # also tells an EventType from an equal str, a tuple from a list


def spots(node: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every value under ``node``."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        yield node, key
        yield from spots(value)


def containers(node: Any) -> Iterator[Any]:
    if isinstance(node, dict | list):
        yield node
        for value in node.values() if isinstance(node, dict) else node:
            yield from containers(value)


def mutate(event: Any, data: st.DataObject) -> Any:
    """One random change of ``event`` (in place where it can be); returns the event."""
    action = data.draw(st.sampled_from(ACTIONS))
    if action == "root":
        return data.draw(junk)
    places = list(spots(event))
    if action == "text":  # same type, other value: the value rules rather than the type rules
        places = [(parent, key) for parent, key in places if isinstance(parent[key], str)]
    if not places:
        return event
    parent, key = data.draw(st.sampled_from(places))
    if action == "text":
        parent[key] = data.draw(st.sampled_from(SPECIAL_STRINGS) | st.text(max_size=6))
    elif action == "replace":
        parent[key] = data.draw(junk)
    elif action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        target = data.draw(st.sampled_from([node for node in containers(event) if isinstance(node, dict)]))
        target[data.draw(st.sampled_from(KEYS) | st.text(max_size=4))] = data.draw(junk)
    elif action == "rekey" and isinstance(parent, dict):  # output field names are keys, for one
        parent[data.draw(st.sampled_from(KEYS + SPECIAL_STRINGS) | st.text(max_size=4))] = parent.pop(key)
    elif action == "grow" and isinstance(parent, list):
        parent.insert(data.draw(st.integers(0, len(parent))), copy.deepcopy(parent[key]))  # duplicates too
    elif action == "shrink" and isinstance(parent, list):
        parent.pop(key)
    elif action == "delete_facet" and isinstance(parent[key], dict):
        parent[key]["_deleted"] = data.draw(st.sampled_from([True, False, 1, None, "true"]))
    return event


def serialize(event: Any, data: st.DataObject) -> bytes:
    """JSON text of ``event``, perhaps with raw snippets or duplicate keys no Python value gives."""
    dicts = [node for node in containers(event) if isinstance(node, dict)]
    if dicts and data.draw(st.booleans()):
        target = data.draw(st.sampled_from(dicts))
        if target and data.draw(st.booleans()):
            # A duplicate of an existing key, before or after it: the later one is what counts.
            copied = data.draw(st.sampled_from(sorted(k for k in target if isinstance(k, str))))
            value = data.draw(junk)
            items = list(target.items())
            target.clear()
            if data.draw(st.booleans()):
                target[DUPLICATE_MARK] = value
            target.update(items)
            target.setdefault(DUPLICATE_MARK, value)
            marker = json.dumps(DUPLICATE_MARK).encode()
            return _dumps(event, data).replace(marker, json.dumps(copied).encode())
        target[RAW_MARK] = RAW_MARK
        return _dumps(event, data).replace(
            json.dumps(RAW_MARK).encode(), data.draw(st.sampled_from(RAW_SNIPPETS))
        )
    return _dumps(event, data)


def _dumps(event: Any, data: st.DataObject) -> bytes:
    # The standard library writes integers of any size (orjson stops at 64 bits), escaped or raw unicode.
    return json.dumps(event, ensure_ascii=data.draw(st.booleans())).encode()


@hypothesis_settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(base=st.sampled_from(BASES), changes=st.integers(1, 3), data=st.data())
def test_mutated_events_get_the_same_answer_from_bytes_str_and_dicts(
    base: dict[str, Any], changes: int, data: st.DataObject
) -> None:
    event: Any = copy.deepcopy(base)
    for _ in range(changes):
        event = mutate(event, data)
    assert_same_answer(event)
    body = serialize(copy.deepcopy(event), data)
    assert_same_answer(body)
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return
    assert_same_answer(text)


EVERY_TYPE = [None, True, 0, -1, 2**64, 1.5, "x", [], {}, [{}]]
BLANK_OR_BAD_KEYS = ["", " ", "\u00a0", "x\x00", "n" * 1025, "a.b"]


def single_changes(event: Any) -> Iterator[tuple[str, Any]]:
    """Each one-spot change of ``event``: a value deleted, retyped, re-texted or doubled; a key renamed."""
    for index, (parent, key) in enumerate(list(spots(event))):

        def changed(change: Callable[[Any, Any], None], index: int = index) -> Any:
            copied = copy.deepcopy(event)
            target_parent, target_key = list(spots(copied))[index]
            change(target_parent, target_key)
            return copied

        label = f"{key!r} of {str(parent)[:60]}"
        yield f"delete {label}", changed(lambda p, k: p.pop(k))
        for value in EVERY_TYPE:
            yield f"{value!r} for {label}", changed(lambda p, k, v=value: p.__setitem__(k, v))
        if isinstance(parent[key], str):
            for text in SPECIAL_STRINGS:
                yield f"{text[:20]!r} for {label}", changed(lambda p, k, t=text: p.__setitem__(k, t))
        if isinstance(parent, list):  # a second schema field, input field, dataset of the same name
            yield f"twice {label}", changed(lambda p, k: p.insert(k, copy.deepcopy(p[k])))
        if isinstance(parent, dict):
            for new_key in BLANK_OR_BAD_KEYS:
                yield (
                    f"key {new_key[:20]!r} for {label}",
                    changed(lambda p, k, n=new_key: p.__setitem__(n, p.pop(k))),
                )


@pytest.mark.parametrize(
    "base", [_orders_event_with_every_container(), _dataset_event(), _deleted_facets_event()]
)
def test_every_single_change_of_an_event_gets_the_same_answer(base: dict[str, Any]) -> None:
    # Exhaustive where the random test samples: each rule gets its boundary values at each place.
    for label, event in single_changes(base):
        try:
            assert_same_answer(event)
            assert_same_answer(json.dumps(event))
            assert_same_answer(json.dumps(event, ensure_ascii=False).encode())
        except AssertionError as error:
            raise AssertionError(f"after {label}: {error}") from None


@pytest.mark.parametrize("event", [*BASES, *iter_synthetic_events(jobs=20, seed=3)])
def test_valid_events_are_read_by_the_fast_path_as_the_old_validator_reads_them(
    event: dict[str, Any],
) -> None:
    body = orjson.dumps(event)
    fast = read_valid_event(orjson.loads(body), NOW, json_text=body)
    assert fast is not None, "a valid event fell through to the detailed checker"
    assert fast == baseline.parse_event(body, now=NOW)
    assert read_valid_event(event, NOW) == fast  # a dict, without its JSON text


@pytest.mark.parametrize("snippet", RAW_SNIPPETS, ids=lambda s: s[:20].decode("latin-1"))
@pytest.mark.parametrize("place", ["top", "run_facets", "unknown_job_facet", "input_facets", "schema_field"])
def test_raw_json_oddities_in_ignored_places_are_judged_alike(snippet: bytes, place: str) -> None:
    event = orders_event()
    target = {
        "top": event,
        "run_facets": event["run"].setdefault("facets", {}),
        "unknown_job_facet": event["job"]["facets"].setdefault("ownership", {}),
        "input_facets": event["inputs"][0].setdefault("inputFacets", {}),
        "schema_field": event["outputs"][0]["facets"]["schema"]["fields"][0],
    }[place]
    target["x-extra"] = RAW_MARK
    body = orjson.dumps(event).replace(json.dumps(RAW_MARK).encode(), snippet)
    assert_same_answer(body)


@pytest.mark.parametrize("depth", [31, 32, 33, 400, 600])
def test_schema_depth_is_judged_alike_at_the_limit_and_far_beyond(depth: int) -> None:
    assert_same_answer(run_event(outputs=[dataset("deep", schema=_nested_schema(depth))]))
    # As text: 600 levels are more than orjson's nesting limit (1,024 arrays and objects), a malformed body.
    nested = '{"name": "leaf"}'
    for level in range(depth):
        nested = f'{{"name": "level{level}", "fields": [{nested}]}}'
    event = run_event(outputs=[dataset("deep", schema={"fields": [RAW_MARK]})])
    assert_same_answer(orjson.dumps(event).replace(json.dumps(RAW_MARK).encode(), nested.encode()))


@pytest.mark.parametrize("value", [2**63 - 1, 2**64 - 1, 2**64, -(2**63) - 1, 10**30, 1.0, True], ids=repr)
def test_ordinal_positions_at_the_parsers_integer_limits_are_judged_alike(value: Any) -> None:
    # orjson reads integers beyond 64 bits as floats (a wrong type); a dict may hold any int.
    event = orders_event()
    event["outputs"][0]["facets"]["schema"]["fields"][0]["ordinal_position"] = value
    assert_same_answer(event)
    assert_same_answer(json.dumps(event).encode())


@pytest.mark.parametrize("buffer", [bytearray, memoryview])
def test_bodies_in_other_buffers_orjson_reads_are_judged_alike(buffer: Callable[[bytes], Any]) -> None:
    # An element of a batch may arrive as a view into the request body rather than bytes of its own.
    nul_in_name = orders_event()
    nul_in_name["job"]["name"] = "etl\x00orders"
    nul_ignored = orders_event()
    nul_ignored["run"]["facets"] = {"parent": {"note": "\x00"}}
    for event in (orders_event(), nul_in_name, nul_ignored):
        assert_same_answer(buffer(orjson.dumps(event)))
    assert isinstance(outcome(parse.parse_event, buffer(orjson.dumps(nul_ignored))), Event)


def test_a_nul_in_an_ignored_facet_is_accepted_by_both() -> None:
    event = orders_event()
    event["job"]["facets"]["ownership"] = {"owners": [{"name": "team\x00a"}]}
    body = orjson.dumps(event)
    assert b"\\u0000" in body
    accepted = parse.parse_event(body, now=NOW)  # the fast path declines; the checker accepts
    assert accepted == baseline.parse_event(body, now=NOW)
    assert parse.check_event(event, now=NOW) == accepted


def test_many_problems_are_capped_and_ordered_alike() -> None:
    event = run_event(inputs=[{"namespace": 1, "name": " "} for _ in range(30)])
    event["eventTime"] = "yesterday"
    assert_same_answer(event)
    assert len(outcome(parse.check_event, event)[1]) == parse.MAX_PROBLEMS
