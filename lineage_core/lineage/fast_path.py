"""Accept a valid event quickly: the same rules as :mod:`lineage_core.lineage.parse`, without the report.

:func:`read_valid_event` returns the :class:`~lineage_core.lineage.event.Event` that the detailed checker
would return, or None as soon as anything is wrong, without saying what: the caller then runs the
detailed checker, which names every problem. Most events are valid, so most pay only for this path.

Most of the work runs in compiled code: ``msgspec.convert`` checks the JSON types, lengths and lists of
:mod:`lineage_core.lineage.shape` in one call, then builds the Event's most numerous parts (schema fields,
input fields, transformations) straight from those Structs; ``map``/``all`` find blank names. Python code
is left with a few calls per dataset. (Built in Python, those frozen dataclasses alone cost about 50 µs
per 12 KiB event, more than all the checks.)

The Structs are converted from orjson's result rather than decoded by msgspec from the bytes, which would
save about 20 µs: msgspec's decoder skips the values it does not keep without checking them as orjson
does, so ``1e400`` or invalid UTF-8 in an unknown facet would pass where the body is malformed JSON to
orjson (and to this API until now). Converting what orjson accepted keeps orjson the one judge of JSON.

The two paths must agree on every input: ``tests/test_lineage_parse_equivalence.py`` compares them on
random and exhaustive mutations of valid events. A rule changed here must change in the checker too, and
the other way round.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from itertools import chain
from operator import attrgetter

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from lineage_core.lineage import shape
from lineage_core.lineage.event import (
    DELETED,
    ColumnLineage,
    Dataset,
    Deleted,
    Event,
    EventKind,
    Field,
    InputField,
    Job,
    JobType,
    Sql,
)
from lineage_core.lineage.models import FIELD_NAME_MAX
from lineage_core.lineage.rules import (
    DATE_TIME_PATTERN,
    MAX_FUTURE,
    MAX_SCHEMA_DEPTH,
    UUID_PATTERN,
    to_utc_datetime,
)

JsonText = bytes | bytearray | memoryview | str  # what orjson.loads reads

_FIELDS = tuple[Field, ...]
_INPUT_FIELD_LISTS = list[tuple[InputField, ...]]
_NAME = attrgetter("name")
_NESTED_FIELDS = attrgetter("fields")
_INPUT_FIELD_NAMES = attrgetter("namespace", "name", "field")


class _NotValidError(Exception):
    """Raised anywhere below at the first broken rule; the detailed checker then says which."""


def read_valid_event(data: object, now: datetime, *, json_text: JsonText | None = None) -> Event | None:
    """The event ``data`` (decoded JSON) describes, or None if it breaks any rule of the checker.

    Args:
        data: the decoded event; its limits (:mod:`lineage_core.lineage.limits`) are checked already.
        now: the current time, for the "eventTime in the future" rule.
        json_text: the JSON text ``data`` was decoded from, when the caller has it (it saves encoding
            ``data`` again to look for NULs).
    """
    if not isinstance(data, dict) or _may_hold_nul(data, json_text):
        return None
    try:
        if "run" in data or "eventType" in data:  # how the checker tells the kinds apart
            return _run_event(msgspec.convert(data, shape.RunEvent), now)
        if "job" in data:
            return _job_event(msgspec.convert(data, shape.JobEvent), now)
        if "dataset" in data:
            return _dataset_event(msgspec.convert(data, shape.DatasetEvent), now)
    # A schema nested hundreds of levels deep exhausts msgspec's recursion guard before the depth rule
    # applies; the checker stops at that rule and reports it.
    except (msgspec.ValidationError, RecursionError, _NotValidError):
        return None
    return None


def _may_hold_nul(data: dict[str, object], json_text: JsonText | None) -> bool:
    """Whether any string of ``data`` may hold a NUL (which no stored string may: PostgreSQL refuses it).

    JSON can carry a NUL only as the escape ``\\u0000`` (a raw one is malformed), so one search of the
    text stands for a check of every string. Strings the store ignores count too: such an event is
    left to the checker, which is slower but gives the same answer.
    """
    if json_text is None:
        try:
            json_text = orjson.dumps(data)
        except orjson.JSONEncodeError:  # not a JSON document (an integer beyond 64 bits)
            return True
    if isinstance(json_text, str):
        return "\\u0000" in json_text
    if isinstance(json_text, memoryview):  # one element of a batch, say: no substring search on a view
        json_text = json_text.tobytes()
    return b"\\u0000" in json_text


def _require_names(names: Iterable[str]) -> None:
    """Every name has a character other than whitespace (the checker's ``name.strip()``)."""
    # map/all run the loop in C; str.strip() returns a name without outer whitespace itself, uncopied.
    if not all(map(str.strip, names)):
        raise _NotValidError


# -- the event ---------------------------------------------------------------------------------------------


def _header(event: shape.EventHeader, now: datetime) -> datetime:
    _require_names((event.producer, event.schema_url))
    match = DATE_TIME_PATTERN.match(event.event_time)
    if match is None or match.group("offset") is None:
        raise _NotValidError
    try:
        moment = to_utc_datetime(match)
    except (ValueError, OverflowError):
        raise _NotValidError from None
    if moment - now > MAX_FUTURE:
        raise _NotValidError
    return moment


def _run_event(event: shape.RunEvent, now: datetime) -> Event:
    event_time = _header(event, now)
    run_id = event.run.run_id
    if not UUID_PATTERN.match(run_id):
        raise _NotValidError
    return Event(
        kind=EventKind.RUN,
        event_time=event_time,
        event_type=None if event.event_type is UNSET else event.event_type,
        run_id=uuid.UUID(run_id),
        job=_job(event.job),
        inputs=tuple([_input(dataset) for dataset in event.inputs]),
        outputs=tuple([_output(dataset) for dataset in event.outputs]),
        producer=event.producer,
    )


def _job_event(event: shape.JobEvent, now: datetime) -> Event:
    return Event(
        kind=EventKind.JOB,
        event_time=_header(event, now),
        job=_job(event.job),
        inputs=tuple([_input(dataset) for dataset in event.inputs]),
        outputs=tuple([_output(dataset) for dataset in event.outputs]),
        producer=event.producer,
    )


def _dataset_event(event: shape.DatasetEvent, now: datetime) -> Event:
    return Event(
        kind=EventKind.DATASET,
        event_time=_header(event, now),
        dataset=_input(event.dataset),
        producer=event.producer,
    )


# -- job ---------------------------------------------------------------------------------------------------


def _job(job: shape.Job) -> Job:
    _require_names((job.namespace, job.name))
    facets = job.facets
    return Job(
        job.namespace,
        job.name,
        documentation=_documentation(facets.documentation),
        sql=_sql(facets.sql),
        job_type=_job_type(facets.job_type),
    )


def _documentation(facet: shape.DocumentationFacet | UnsetType) -> str | Deleted | None:
    if facet is UNSET:
        return None
    if facet.deleted:
        return DELETED
    if facet.description is None:
        raise _NotValidError
    return facet.description


def _sql(facet: shape.SqlFacet | UnsetType) -> Sql | Deleted | None:
    if facet is UNSET:
        return None
    if facet.deleted:
        return DELETED
    if facet.query is None:
        raise _NotValidError
    return Sql(facet.query, facet.dialect)


def _job_type(facet: shape.JobTypeFacet | UnsetType) -> JobType | Deleted | None:
    if facet is UNSET:
        return None
    if facet.deleted:
        return DELETED
    if facet.processing_type is None or facet.integration is None:
        raise _NotValidError
    return JobType(facet.processing_type, facet.integration, facet.job_type)


# -- datasets ----------------------------------------------------------------------------------------------


def _input(dataset: shape.InputDataset) -> Dataset:
    _require_names((dataset.namespace, dataset.name))
    facets = dataset.facets
    return Dataset(
        dataset.namespace,
        dataset.name,
        schema=_schema(facets.schema),
        documentation=_documentation(facets.documentation),
    )


def _output(dataset: shape.OutputDataset) -> Dataset:
    _require_names((dataset.namespace, dataset.name))
    facets = dataset.facets
    return Dataset(
        dataset.namespace,
        dataset.name,
        schema=_schema(facets.schema),
        documentation=_documentation(facets.documentation),
        column_lineage=_column_lineage(facets.column_lineage),
    )


def _schema(facet: shape.SchemaFacet | UnsetType) -> tuple[Field, ...] | Deleted | None:
    if facet is UNSET:
        return None
    if facet.deleted:
        return DELETED
    items = facet.fields
    if any(map(_NESTED_FIELDS, items)):
        fields: list[Field] = []
        _nested_schema_fields(items, "", 0, fields, set())
        return tuple(fields)
    # A flat schema, the common case: each field keeps its own name, so msgspec builds the Fields.
    names = list(map(_NAME, items))
    _require_names(names)
    if len(set(names)) != len(names):
        raise _NotValidError
    return msgspec.convert(items, _FIELDS, from_attributes=True)


def _nested_schema_fields(
    items: list[shape.SchemaField], prefix: str, depth: int, out: list[Field], seen: set[str]
) -> None:
    """Appends ``items`` and their nested fields to ``out`` flat, named "parent.child", parents first."""
    # The checker's depth rule counts each field as a level of its own, nested fields or not.
    if items and depth >= MAX_SCHEMA_DEPTH:
        raise _NotValidError
    for item in items:
        full_name = prefix + item.name
        if not item.name.strip() or len(full_name) > FIELD_NAME_MAX or full_name in seen:
            raise _NotValidError
        seen.add(full_name)
        out.append(Field(full_name, item.type, item.description))
        _nested_schema_fields(item.fields, f"{full_name}.", depth + 1, out, seen)


def _column_lineage(facet: shape.ColumnLineageFacet | UnsetType) -> ColumnLineage | None:
    # A deleted columnLineage facet is simply no column lineage: lineage is replaced as a whole.
    if facet is UNSET or facet.deleted:
        return None
    if facet.fields is UNSET:
        raise _NotValidError
    output_fields = facet.fields
    _require_names(output_fields)
    # Every output field's input fields, then the dataset-level ones: one msgspec call builds them all.
    sources = [lineage.input_fields for lineage in output_fields.values()]
    sources.append(facet.dataset)
    _require_names(chain.from_iterable(map(_INPUT_FIELD_NAMES, chain.from_iterable(sources))))
    built = msgspec.convert(sources, _INPUT_FIELD_LISTS, from_attributes=True)
    dataset = built.pop()
    return ColumnLineage(tuple(zip(output_fields, built, strict=True)), dataset)
