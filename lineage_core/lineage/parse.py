"""Parse and check one incoming OpenLineage event (spec 2-0-2) before anything of it is stored.

:func:`parse_event` turns a request body (or a line of an import file) into an
:class:`~lineage_core.lineage.event.Event`, or raises :class:`EventError` listing every problem found,
each with the path of the field (``run.runId``, ``outputs[0].facets.schema.fields[2].name``) and a
sentence saying what is wrong and what is expected.

What is checked: the fields the spec requires (``eventTime``, ``producer``, ``schemaURL``, ``run.runId``,
``job.namespace``/``name``, dataset ``namespace``/``name``), their JSON types, ``runId`` as a UUID,
``eventTime`` as an RFC 3339 date-time *with* an offset, ``eventType`` against the spec's list, and the
facets the store keeps (``schema``, ``documentation``, ``columnLineage``, ``sql``, ``jobType``) against
their facet schemas. Other facets are accepted and ignored. Strings must fit the store's columns and may
not contain NUL characters (PostgreSQL text cannot hold them).

A valid event is read by :mod:`lineage_core.lineage.fast_path` (msgspec Structs, no report built); only
an event it does not accept is walked by the checker below, which names each problem. Both apply the
same rules, so which path read an event changes nothing but the time taken.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from lineage_core.lineage.event import (
    DELETED,
    ColumnLineage,
    Dataset,
    Deleted,
    Event,
    EventKind,
    EventType,
    Field,
    InputField,
    Job,
    JobType,
    Sql,
    Transformation,
)
from lineage_core.lineage.fast_path import JsonText, read_valid_event
from lineage_core.lineage.limits import check_event_size
from lineage_core.lineage.models import FIELD_NAME_MAX, LABEL_MAX, NAME_MAX, NAMESPACE_MAX
from lineage_core.lineage.rules import (
    DATE_TIME_PATTERN,
    MAX_FUTURE,
    MAX_SCHEMA_DEPTH,
    TRANSFORMATION_TYPES,
    UUID_PATTERN,
    to_utc_datetime,
)

MAX_PROBLEMS = 20

_IDENTIFIER = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z", re.ASCII)
_EXPECTED = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer"}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason an event is rejected: the field's path, a machine-readable code, a sentence."""

    field: str
    code: str  # malformed_json | wrong_type | missing_field | invalid_value | too_long | too_many_items
    message: str


class EventError(ValueError):
    """The event is rejected; ``problems`` (never empty) says which fields are wrong and why."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems[0].message)
        self.problems = problems


class EventTooLargeError(EventError):
    """The event goes over one of the limits of :mod:`lineage_core.lineage.limits` (the API's 413)."""


class _TooManyProblemsError(Exception):
    """Stops the walk once MAX_PROBLEMS are collected."""


def parse_event(body: bytes | str, *, now: datetime | None = None) -> Event:
    """Parse a JSON document and check it as one OpenLineage event.

    Args:
        body: the JSON text (UTF-8 bytes or str).
        now: the current time, for the "eventTime in the future" check (default: the clock).

    Raises:
        EventError: the body is not JSON, or the event breaks the rules above.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise EventError(
            [Problem("body", "malformed_json", f"The body is not valid JSON: {error}. Send one JSON object.")]
        ) from None
    return _checked(data, now, json_text=body)


def check_event(data: Any, *, now: datetime | None = None) -> Event:
    """Check an already decoded JSON value as one OpenLineage event. See :func:`parse_event`.

    Raises:
        EventTooLargeError: the event lists more inputs, outputs, schema fields or column-lineage edges
            than :data:`lineage_core.lineage.limits.DEFAULT_LIMITS` allow (counted before anything else).
        EventError: the event breaks another rule.
    """
    return _checked(data, now, json_text=None)


def _checked(data: Any, now: datetime | None, json_text: JsonText | None) -> Event:
    breach = check_event_size(data)
    if breach is not None:
        raise EventTooLargeError([Problem(breach.field, "too_many_items", breach.message)])
    now = now or datetime.now(UTC)
    event = read_valid_event(data, now, json_text=json_text)
    if event is not None:
        return event
    checker = _Checker(now)
    try:
        checked = checker.event(data)
    except _TooManyProblemsError:
        checked = None
    if checker.problems or checked is None:
        raise EventError(checker.problems)
    return checked


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _key_path(path: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{orjson.dumps(key).decode()}]"


class _Checker:
    """Walks the event, collecting problems; returns None for any part it could not read."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.problems: list[Problem] = []

    def problem(self, path: str, code: str, message: str) -> None:
        self.problems.append(Problem(path, code, message))
        if len(self.problems) >= MAX_PROBLEMS:
            raise _TooManyProblemsError

    # -- JSON primitives -------------------------------------------------------------------------------

    def value(self, obj: dict[str, Any], key: str, path: str, expected: type, required: bool) -> Any:
        """``obj[key]`` if it has the ``expected`` JSON type; None (and a problem) otherwise."""
        where = _key_path(path, key)
        if key not in obj:
            if required:
                self.problem(where, "missing_field", f"{where} is required.")
            return None
        value = obj[key]
        type_ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if not type_ok:
            wanted = _EXPECTED[expected]
            self.problem(where, "wrong_type", f"{where} must be {wanted}; got {_json_type(value)}.")
            return None
        return value

    def string(
        self,
        obj: dict[str, Any],
        key: str,
        path: str,
        *,
        required: bool = False,
        max_chars: int | None = None,
        non_empty: bool = False,
    ) -> str | None:
        value: str | None = self.value(obj, key, path, str, required)
        if value is None:
            return None
        where = _key_path(path, key)
        if non_empty and not value.strip():
            self.problem(where, "invalid_value", f"{where} must not be empty.")
            return None
        if max_chars is not None and len(value) > max_chars:
            self.problem(
                where,
                "too_long",
                f"{where} is {len(value)} characters long; at most {max_chars} are allowed.",
            )
            return None
        if "\x00" in value:
            self.problem(where, "invalid_value", f"{where} contains a NUL character (\\u0000); remove it.")
            return None
        return value

    def array_of_objects(
        self, obj: dict[str, Any], key: str, path: str, required: bool = False
    ) -> list[tuple[dict[str, Any], str]]:
        """The objects of the array ``obj[key]`` with their paths; non-objects are reported and skipped."""
        items = self.value(obj, key, path, list, required)
        if items is None:
            return []
        where = _key_path(path, key)
        result = []
        for index, item in enumerate(items):
            if isinstance(item, dict):
                result.append((item, f"{where}[{index}]"))
            else:
                self.problem(
                    f"{where}[{index}]",
                    "wrong_type",
                    f"{where}[{index}] must be an object; got {_json_type(item)}.",
                )
        return result

    # -- the event -------------------------------------------------------------------------------------

    def event(self, data: Any) -> Event | None:
        if not isinstance(data, dict):
            self.problem("event", "wrong_type", f"The event must be a JSON object; got {_json_type(data)}.")
            return None
        kind = self.kind(data)
        event_time = self.event_time(data)
        producer = self.string(data, "producer", "", required=True, non_empty=True)
        self.string(data, "schemaURL", "", required=True, non_empty=True)
        if kind is None:
            return None
        if kind is EventKind.DATASET:
            dataset_obj = self.value(data, "dataset", "", dict, True)
            dataset = self.dataset(dataset_obj, "dataset", output=False) if dataset_obj is not None else None
            if event_time is None or dataset is None or self.problems:
                return None
            return Event(kind=kind, event_time=event_time, dataset=dataset, producer=producer or "")

        event_type = self.event_type(data) if kind is EventKind.RUN else None
        run_id = self.run(data) if kind is EventKind.RUN else None
        job_obj = self.value(data, "job", "", dict, True)
        job = self.job(job_obj) if job_obj is not None else None
        inputs = self.datasets(data, "inputs", output=False)
        outputs = self.datasets(data, "outputs", output=True)
        if event_time is None or job is None or self.problems:
            return None
        return Event(
            kind=kind,
            event_time=event_time,
            event_type=event_type,
            run_id=run_id,
            job=job,
            inputs=inputs,
            outputs=outputs,
            producer=producer or "",
        )

    def kind(self, data: dict[str, Any]) -> EventKind | None:
        # The spec tells the three kinds apart by which of run / job / dataset they carry. An event with
        # an eventType is meant as a RunEvent, so a missing run is reported rather than taken as a JobEvent.
        if "run" in data or "eventType" in data:
            if "run" not in data:
                self.problem(
                    "run", "missing_field", "run is required in a RunEvent (an event with eventType)."
                )
            return EventKind.RUN
        if "job" in data:
            return EventKind.JOB
        if "dataset" in data:
            return EventKind.DATASET
        self.problem(
            "job",
            "missing_field",
            "The event has no job: send a RunEvent (run and job), a JobEvent (job) "
            "or a DatasetEvent (dataset).",
        )
        return None

    def event_time(self, data: dict[str, Any]) -> datetime | None:
        raw = self.string(data, "eventTime", "", required=True)
        if raw is None:
            return None
        match = DATE_TIME_PATTERN.match(raw)
        if match is None:
            self.problem(
                "eventTime",
                "invalid_value",
                f"eventTime {raw!r} is not an RFC 3339 date-time such as '2024-05-01T12:30:00.000Z'.",
            )
            return None
        if match.group("offset") is None:
            self.problem(
                "eventTime",
                "invalid_value",
                f"eventTime {raw!r} has no UTC offset, so the moment it names is ambiguous; "
                "end it with 'Z' or an offset such as '+02:00'.",
            )
            return None
        try:
            moment = to_utc_datetime(match)
        except (ValueError, OverflowError):
            self.problem("eventTime", "invalid_value", f"eventTime {raw!r} is not a valid date and time.")
            return None
        if moment - self.now > MAX_FUTURE:
            self.problem(
                "eventTime",
                "invalid_value",
                f"eventTime {raw!r} is more than a day in the future; check the producer's clock.",
            )
            return None
        return moment

    def event_type(self, data: dict[str, Any]) -> EventType | None:
        raw = self.string(data, "eventType", "")
        if raw is None:
            return None
        try:
            return EventType(raw)
        except ValueError:
            allowed = ", ".join(t.value for t in EventType)
            self.problem("eventType", "invalid_value", f"eventType {raw!r} is not one of {allowed}.")
            return None

    def run(self, data: dict[str, Any]) -> uuid.UUID | None:
        run = self.value(data, "run", "", dict, False)
        if run is None:
            return None
        self.value(run, "facets", "run", dict, False)
        raw = self.string(run, "runId", "run", required=True)
        if raw is None:
            return None
        if not UUID_PATTERN.match(raw):
            self.problem(
                "run.runId",
                "invalid_value",
                f"run.runId {raw!r} is not a UUID such as '0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e'.",
            )
            return None
        return uuid.UUID(raw)

    # -- job -------------------------------------------------------------------------------------------

    def job(self, obj: dict[str, Any]) -> Job | None:
        namespace = self.string(
            obj, "namespace", "job", required=True, non_empty=True, max_chars=NAMESPACE_MAX
        )
        name = self.string(obj, "name", "job", required=True, non_empty=True, max_chars=NAME_MAX)
        facets = self.value(obj, "facets", "job", dict, False) or {}
        documentation = self.facet(facets, "documentation", "job.facets", self.documentation)
        sql = self.facet(facets, "sql", "job.facets", self.sql)
        job_type = self.facet(facets, "jobType", "job.facets", self.job_type)
        if namespace is None or name is None:
            return None
        return Job(namespace, name, documentation=documentation, sql=sql, job_type=job_type)

    def facet(
        self,
        facets: dict[str, Any],
        key: str,
        path: str,
        read: Callable[[dict[str, Any], str], T | None],
    ) -> T | Deleted | None:
        """A known facet: None if absent or unreadable, DELETED for ``"_deleted": true``, else its content."""
        obj = self.value(facets, key, path, dict, False)
        if obj is None:
            return None
        where = _key_path(path, key)
        if self.value(obj, "_deleted", where, bool, False):
            return DELETED
        return read(obj, where)

    def documentation(self, obj: dict[str, Any], path: str) -> str | None:
        return self.string(obj, "description", path, required=True)

    def sql(self, obj: dict[str, Any], path: str) -> Sql | None:
        query = self.string(obj, "query", path, required=True)
        dialect = self.string(obj, "dialect", path, max_chars=LABEL_MAX)
        return None if query is None else Sql(query, dialect)

    def job_type(self, obj: dict[str, Any], path: str) -> JobType | None:
        processing = self.string(obj, "processingType", path, required=True, max_chars=LABEL_MAX)
        integration = self.string(obj, "integration", path, required=True, max_chars=LABEL_MAX)
        job_type = self.string(obj, "jobType", path, max_chars=LABEL_MAX)
        if processing is None or integration is None:
            return None
        return JobType(processing, integration, job_type)

    # -- datasets --------------------------------------------------------------------------------------

    def datasets(self, data: dict[str, Any], key: str, *, output: bool) -> tuple[Dataset, ...]:
        result = []
        for obj, path in self.array_of_objects(data, key, ""):
            dataset = self.dataset(obj, path, output=output)
            if dataset is not None:
                result.append(dataset)
        return tuple(result)

    def dataset(self, obj: dict[str, Any], path: str, *, output: bool) -> Dataset | None:
        namespace = self.string(
            obj, "namespace", path, required=True, non_empty=True, max_chars=NAMESPACE_MAX
        )
        name = self.string(obj, "name", path, required=True, non_empty=True, max_chars=NAME_MAX)
        facets_path = f"{path}.facets"
        facets = self.value(obj, "facets", path, dict, False) or {}
        self.value(obj, "inputFacets" if not output else "outputFacets", path, dict, False)
        schema = self.facet(facets, "schema", facets_path, self.schema)
        documentation = self.facet(facets, "documentation", facets_path, self.documentation)
        column_lineage = None
        if output:
            lineage = self.facet(facets, "columnLineage", facets_path, self.column_lineage)
            # A deleted columnLineage facet is simply no column lineage: lineage is replaced as a whole.
            column_lineage = lineage if isinstance(lineage, ColumnLineage) else None
        if namespace is None or name is None:
            return None
        return Dataset(
            namespace, name, schema=schema, documentation=documentation, column_lineage=column_lineage
        )

    def schema(self, obj: dict[str, Any], path: str) -> tuple[Field, ...] | None:
        fields: list[Field] = []
        seen: dict[str, str] = {}
        self.schema_fields(obj, path, "", 0, fields, seen)
        return tuple(fields)

    def schema_fields(
        self, obj: dict[str, Any], path: str, prefix: str, depth: int, out: list[Field], seen: dict[str, str]
    ) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            self.problem(
                path, "invalid_value", f"{path} nests fields more than {MAX_SCHEMA_DEPTH} levels deep."
            )
            return
        for item, item_path in self.array_of_objects(obj, "fields", path):
            name = self.string(item, "name", item_path, required=True, non_empty=True)
            type_ = self.string(item, "type", item_path)
            description = self.string(item, "description", item_path)
            self.value(item, "ordinal_position", item_path, int, False)
            if name is None:
                continue
            full_name = f"{prefix}{name}"
            if len(full_name) > FIELD_NAME_MAX:
                self.problem(
                    f"{item_path}.name",
                    "too_long",
                    f"{item_path}.name is {len(full_name)} characters long (with its parents' names); "
                    f"at most {FIELD_NAME_MAX} are allowed.",
                )
                continue
            if full_name in seen:
                self.problem(
                    f"{item_path}.name",
                    "invalid_value",
                    f"{item_path}.name {full_name!r} repeats the field at {seen[full_name]}; "
                    "field names must be unique in a schema.",
                )
                continue
            seen[full_name] = item_path
            out.append(Field(full_name, type_, description))
            # Nested (struct) fields are kept flat, named "parent.child".
            self.schema_fields(item, item_path, f"{full_name}.", depth + 1, out, seen)

    def column_lineage(self, obj: dict[str, Any], path: str) -> ColumnLineage | None:
        fields_obj = self.value(obj, "fields", path, dict, True)
        fields = []
        for output_field, spec in (fields_obj or {}).items():
            field_path = _key_path(f"{path}.fields", output_field)
            if not output_field.strip() or len(output_field) > FIELD_NAME_MAX or "\x00" in output_field:
                self.problem(
                    field_path,
                    "invalid_value",
                    f"{field_path}: an output field name must be 1-{FIELD_NAME_MAX} characters without NUL.",
                )
                continue
            if not isinstance(spec, dict):
                self.problem(
                    field_path, "wrong_type", f"{field_path} must be an object; got {_json_type(spec)}."
                )
                continue
            inputs = self.input_fields(spec, "inputFields", field_path, required=True)
            fields.append((output_field, inputs))
        dataset = self.input_fields(obj, "dataset", path, required=False)
        return ColumnLineage(tuple(fields), dataset)

    def input_fields(
        self, obj: dict[str, Any], key: str, path: str, *, required: bool
    ) -> tuple[InputField, ...]:
        result = []
        for item, item_path in self.array_of_objects(obj, key, path, required):
            namespace = self.string(
                item, "namespace", item_path, required=True, non_empty=True, max_chars=NAMESPACE_MAX
            )
            name = self.string(item, "name", item_path, required=True, non_empty=True, max_chars=NAME_MAX)
            field = self.string(
                item, "field", item_path, required=True, non_empty=True, max_chars=FIELD_NAME_MAX
            )
            transformations = []
            for t_obj, t_path in self.array_of_objects(item, "transformations", item_path):
                transformation = self.transformation(t_obj, t_path)
                if transformation is not None:
                    transformations.append(transformation)
            if namespace is not None and name is not None and field is not None:
                result.append(InputField(namespace, name, field, tuple(transformations)))
        return tuple(result)

    def transformation(self, obj: dict[str, Any], path: str) -> Transformation | None:
        type_ = self.string(obj, "type", path, required=True)
        subtype = self.string(obj, "subtype", path, max_chars=LABEL_MAX)
        description = self.string(obj, "description", path)
        masking = self.value(obj, "masking", path, bool, False)
        if type_ is None:
            return None
        if type_ not in TRANSFORMATION_TYPES:
            self.problem(
                f"{path}.type", "invalid_value", f"{path}.type {type_!r} is not one of DIRECT, INDIRECT."
            )
            return None
        return Transformation(type_, subtype, masking, description)
