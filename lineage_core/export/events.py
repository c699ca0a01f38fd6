"""One OpenLineage RunEvent per job of the snapshot, as an NDJSON line.

:class:`EventWriter` turns each :class:`~lineage_core.lineage.graph.JobLineage` read from the store into
one line of ``openlineage-events.jsonl``: a ``COMPLETE`` RunEvent (spec 2-0-2) serialized with orjson and
ended by ``\\n``. The shape (``ARCHITECTURE.md``, "OpenLineage shape"):

* ``eventTime`` is the snapshot time, identical on every line of one export; ``run.runId`` is a UUIDv7
  whose time part is the snapshot time and whose other bits hash the snapshot time and the job's
  namespace and name, so it is deterministic for (snapshot, job) and sorts by snapshot.
* ``job``: namespace, name, and the facets the store has: ``documentation`` (the job's description),
  ``sql`` (query and dialect) and ``jobType`` (only with both processingType and integration, which the
  facet requires).
* ``inputs`` and ``outputs`` are always present (``[]`` when empty). Every dataset carries a ``schema``
  facet when fields are known (every field has a ``type``: ``"UNKNOWN"`` when no producer ever sent one,
  because several consumers require it; nested fields stay flat, named ``parent.child``, as the store
  keeps them) and a ``documentation`` facet with the table description when there is one. Outputs also
  carry ``columnLineage``: per output field its input fields with each transformation's type, subtype,
  masking and the explanation of the transformation (``description``; ``transformations`` is ``[]``
  when the producer sent none), plus dataset-level dependencies.
* No ``null`` anywhere: a value the store does not have is left out, never written as ``null``. Every
  facet has ``_producer`` (:data:`PRODUCER`) and the ``_schemaURL`` of the spec version in
  ``openlineage-spec`` (columnLineage 1-2-0, schema 1-2-0, documentation 1-1-0, sql 1-1-0, jobType 2-0-4).

**Events larger than 300 KB.** Amazon DataZone rejects events over 300,000 bytes, so no line exceeds
:data:`MAX_EVENT_BYTES` (the UTF-8 length of the JSON, without the newline). An event over the limit is
rebuilt with less detail, one step at a time, until it fits; the job and its table-level lineage are
kept as long as at all possible:

1. the input datasets' facets are dropped (the job that writes a dataset carries them in its own event);
2. the job's ``sql`` facet is dropped;
3. descriptions are dropped: the job's and the outputs' ``documentation`` facets and the schema fields'
   descriptions;
4. the explanations (``description``) of column transformations are dropped;
5. the ``columnLineage`` facet is dropped;
6. the outputs' ``schema`` facet is dropped, leaving table-level lineage only.

If even the table-level event is too large (tens of thousands of inputs or outputs), the job is left out
of the file. Each trimmed or omitted job is logged with its name and counted in :class:`EventStats`,
which the export's result reports.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import repeat
from operator import contains
from typing import Any

import orjson

from lineage_core.lineage.graph import (
    DatasetField,
    FieldInputsJson,
    InputDataset,
    InputFieldJson,
    JobLineage,
    OutputDataset,
    TransformationJson,
)
from lineage_core.lineage.graph_json import NO_COLUMN_LINEAGE, NO_DEPENDENCIES, DatasetJson, JobJson

logger = logging.getLogger(__name__)


def _producer() -> str:
    try:
        version = importlib.metadata.version("openlineage-s3-export")
    except importlib.metadata.PackageNotFoundError:  # running from a clone that was never installed
        version = "dev"
    return f"https://github.com/foundational/openlineage-s3-export/tree/v{version}"


# The spec asks for a URI identifying the producer, "for example a git url with a given tag or sha".
PRODUCER = _producer()
SPEC_VERSION = "2-0-2"
EVENT_SCHEMA_URL = f"https://openlineage.io/spec/{SPEC_VERSION}/OpenLineage.json#/$defs/RunEvent"
MAX_EVENT_BYTES = 300_000
UNKNOWN_FIELD_TYPE = "UNKNOWN"


def _facet_url(version: str, name: str) -> str:
    return f"https://openlineage.io/spec/facets/{version}/{name}.json#/$defs/{name}"


SCHEMA_URL = _facet_url("1-2-0", "SchemaDatasetFacet")
DATASET_DOCUMENTATION_URL = _facet_url("1-1-0", "DocumentationDatasetFacet")
COLUMN_LINEAGE_URL = _facet_url("1-2-0", "ColumnLineageDatasetFacet")
JOB_DOCUMENTATION_URL = _facet_url("1-1-0", "DocumentationJobFacet")
SQL_URL = _facet_url("1-1-0", "SQLJobFacet")
JOB_TYPE_URL = _facet_url("2-0-4", "JobTypeJobFacet")


@dataclass(frozen=True, slots=True)
class Detail:
    """How much of a job an event carries; each step of the >300 KB rule turns one part off."""

    input_facets: bool = True
    sql: bool = True
    descriptions: bool = True
    transformation_descriptions: bool = True
    column_lineage: bool = True
    output_schema: bool = True


FULL = Detail()


def _trim_steps() -> tuple[tuple[str, Detail], ...]:
    """The >300 KB rule's steps, in order (see the module docstring): each drops one more part."""
    steps = []
    detail = FULL
    for what, part in (
        ("input dataset facets", "input_facets"),
        ("sql facet", "sql"),
        ("descriptions", "descriptions"),
        ("transformation explanations", "transformation_descriptions"),
        ("columnLineage facet", "column_lineage"),
        ("output schema facets", "output_schema"),
    ):
        detail = replace(detail, **{part: False})
        steps.append((what, detail))
    return tuple(steps)


TRIM_STEPS = _trim_steps()


@dataclass
class EventStats:
    """What an :class:`EventWriter` has written so far."""

    events: int = 0
    trimmed: int = 0  # events written with less detail to stay under the size limit
    omitted: int = 0  # jobs left out because even their table-level event was too large
    omitted_jobs: list[str] = field(default_factory=list)  # "namespace/name", the first few

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "trimmed": self.trimmed, "omitted": self.omitted}


_OMITTED_NAMES_KEPT = 20


def snapshot_run_id(snapshot_time: datetime, namespace: str, name: str) -> str:
    """The runId of a job's event in the snapshot taken at ``snapshot_time``: a deterministic UUIDv7.

    The 48-bit time part is the snapshot time in milliseconds (so ids sort by snapshot, as UUIDv7
    promises); the other 74 bits, random in a UUIDv7, are a SHA-256 of the snapshot time and the job's
    namespace and name. The same snapshot of the same job always gets the same id.
    """
    return _RunIds(snapshot_time)(namespace, name)


class _RunIds:
    """:func:`snapshot_run_id` with the per-snapshot work done once (it runs for every job)."""

    def __init__(self, snapshot_time: datetime) -> None:
        moment = snapshot_time.astimezone(UTC)
        self._salt = f"{moment.isoformat()}\x00".encode()
        time_hex = (int(moment.timestamp() * 1000) & 0xFFFF_FFFF_FFFF).to_bytes(6).hex()
        self._prefix = f"{time_hex[:8]}-{time_hex[8:]}-7"  # the time part and the version nibble

    def __call__(self, namespace: str, name: str) -> str:
        # The bytes after the time part are the digest's first 10, with the version nibble (the "7" of
        # the prefix replaces the digest's first hex digit) and the RFC 9562 variant (the top two bits of
        # the 9th byte set to 10) written over them; done on the hex text, it needs no bytearray.
        text = hashlib.sha256(self._salt + f"{namespace}\x00{name}".encode()).digest()[:10].hex()
        return f"{self._prefix}{text[1:4]}-{_VARIANT[text[4]]}{text[5:8]}-{text[8:]}"


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def format_event_time(moment: datetime) -> str:
    """RFC 3339 in UTC with milliseconds and a ``Z``: ``2026-01-01T00:00:00.000Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventWriter:
    """Builds and serializes the events of one snapshot, applying the >300 KB rule.

    Args:
        snapshot_time: the instant the snapshot is taken; every event's eventTime, and part of its runId.
        producer: the ``producer`` and every facet's ``_producer``.
        max_event_bytes: the size limit of one event (tests lower it).
        dataset_cache_size: how many datasets' serialized facets to keep (see :class:`_DatasetCache`).
    """

    def __init__(
        self,
        snapshot_time: datetime,
        *,
        producer: str = PRODUCER,
        max_event_bytes: int = MAX_EVENT_BYTES,
        dataset_cache_size: int = 4096,
    ) -> None:
        if snapshot_time.tzinfo is None:
            raise ValueError("snapshot_time must be timezone-aware")
        self.snapshot_time = snapshot_time
        self.event_time = format_event_time(snapshot_time)
        self.producer = producer
        self.max_event_bytes = max_event_bytes
        self.stats = EventStats()
        self._run_id = _RunIds(snapshot_time)
        self._datasets = _DatasetCache(producer, dataset_cache_size)
        # The columnLineage facet up to its "fields" value (json_line): _column_lineage's key order.
        self._column_lineage_head = (
            orjson.dumps({"_producer": producer, "_schemaURL": COLUMN_LINEAGE_URL})[:-1] + b',"fields":'
        )

    def event(self, job: JobLineage, detail: Detail = FULL) -> dict[str, Any]:
        """The RunEvent of ``job`` as plain dicts (no size rule applied)."""
        producer = self.producer
        return self._envelope(
            job,
            [_input(dataset, producer, detail) for dataset in job.inputs],
            [
                _output(
                    dataset,
                    _dataset_facets(dataset, producer, detail) if detail.output_schema else {},
                    producer,
                    detail,
                )
                for dataset in job.outputs
            ],
            detail,
        )

    def line(self, job: JobLineage) -> bytes | None:
        """The NDJSON line of ``job`` (ending in ``\\n``), or None if the job cannot fit the size limit.

        Byte for byte ``orjson.dumps(self.event(job))`` plus a newline when it fits, only built faster:
        each dataset's facets are built and serialized once, and its ``inputs`` entry serialized once,
        then reused by every event that names the dataset (:class:`_DatasetCache`); column lineage
        comes from the store in the spec's shape and goes in as it is; the rest is built with dict
        literals in one pass (this runs once per job, the export's hot path). The size rule measures
        the line just serialized: the event is built again only when it is over the limit.
        """
        get = self._datasets.get
        producer = self.producer
        outputs = []
        for dataset in job.outputs:
            entry = get(dataset)
            if dataset.column_lineage or dataset.dataset_dependencies:
                # The dataset's cached entry with columnLineage appended to its facets: orjson writes
                # {"key":value,...} without spaces, so these are the bytes it would write for the dict.
                outputs.append(
                    orjson.Fragment(
                        b"".join(
                            (
                                entry.head,
                                entry.column_lineage_key,
                                orjson.dumps(_column_lineage(dataset, producer)),
                                b"}}",
                            )
                        )
                    )
                )
            else:
                outputs.append(entry.entry)
        return self._full_line(job, [get(dataset).entry for dataset in job.inputs], outputs)

    def json_line(self, job: JobJson) -> bytes | None:
        """:meth:`line` of a job read with its bulk in JSON (:mod:`lineage_core.lineage.graph_json`): the
        same bytes as :meth:`line` of the same job, the store's JSON spliced in as it is."""
        get = self._datasets.get_json
        column_lineage_head = self._column_lineage_head
        outputs = []
        for dataset in job.outputs:
            entry = get(dataset)
            column_lineage = dataset.column_lineage_json
            dependencies = dataset.dataset_dependencies_json
            if dependencies != NO_DEPENDENCIES:
                # What _column_lineage's dict serializes to: "dataset" follows "fields", when there is one.
                tail = f'{column_lineage},"dataset":{dependencies}}}}}}}'
            elif column_lineage != NO_COLUMN_LINEAGE:
                tail = f"{column_lineage}}}}}}}"
            else:
                outputs.append(entry.entry)
                continue
            outputs.append(
                orjson.Fragment(
                    b"".join((entry.head, entry.column_lineage_key, column_lineage_head, tail.encode()))
                )
            )
        return self._full_line(job, [get(dataset).entry for dataset in job.inputs], outputs)

    def _full_line(self, job: JobLineage | JobJson, inputs: list[Any], outputs: list[Any]) -> bytes | None:
        """The line of ``job`` with its datasets' entries serialized (:meth:`line`, :meth:`json_line`),
        or, over the size limit, the line rebuilt with less detail (None if even that cannot fit)."""
        producer = self.producer
        line = orjson.dumps(
            {
                "eventType": "COMPLETE",
                "eventTime": self.event_time,
                "producer": producer,
                "schemaURL": EVENT_SCHEMA_URL,
                "run": {"runId": self._run_id(job.namespace, job.name), "facets": {}},
                "job": {
                    "namespace": job.namespace,
                    "name": job.name,
                    "facets": _job_facets(job, producer, FULL),
                },
                "inputs": inputs,
                "outputs": outputs,
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )
        if len(line) - 1 > self.max_event_bytes:
            whole = job.as_job_lineage() if isinstance(job, JobJson) else job
            return self._trimmed_line(whole, len(line) - 1)
        self.stats.events += 1
        return line

    def lines(self, jobs: Iterable[JobLineage | JobJson]) -> Iterator[bytes]:
        """The lines of ``jobs``, skipping the jobs that cannot fit."""
        line_of, json_line_of = self.line, self.json_line
        for job in jobs:
            line = json_line_of(job) if type(job) is JobJson else line_of(job)  # type: ignore[arg-type]
            if line is not None:
                yield line

    def _envelope(
        self, job: JobLineage, inputs: list[Any], outputs: list[dict[str, Any]], detail: Detail
    ) -> dict[str, Any]:
        return {
            "eventType": "COMPLETE",
            "eventTime": self.event_time,
            "producer": self.producer,
            "schemaURL": EVENT_SCHEMA_URL,
            "run": {"runId": self._run_id(job.namespace, job.name), "facets": {}},
            "job": {
                "namespace": job.namespace,
                "name": job.name,
                "facets": _job_facets(job, self.producer, detail),
            },
            "inputs": inputs,
            "outputs": outputs,
        }

    def _trimmed_line(self, job: JobLineage, full_size: int) -> bytes | None:
        for step, detail in TRIM_STEPS:
            line = orjson.dumps(self.event(job, detail), option=orjson.OPT_APPEND_NEWLINE)
            if len(line) - 1 <= self.max_event_bytes:
                logger.warning(
                    "event of job %s/%s is %d bytes, over the %d-byte limit: written without %s and "
                    "the earlier steps of the size rule (%d bytes)",
                    job.namespace,
                    job.name,
                    full_size,
                    self.max_event_bytes,
                    step,
                    len(line) - 1,
                )
                self.stats.events += 1
                self.stats.trimmed += 1
                return line
        logger.warning(
            "job %s/%s left out of the export: even its table-level event (%d inputs, %d outputs) is over "
            "the %d-byte limit",
            job.namespace,
            job.name,
            len(job.inputs),
            len(job.outputs),
            self.max_event_bytes,
        )
        self.stats.omitted += 1
        if len(self.stats.omitted_jobs) < _OMITTED_NAMES_KEPT:
            self.stats.omitted_jobs.append(f"{job.namespace}/{job.name}")
        return None


class _CachedDataset:
    """A dataset's entry of ``inputs`` (and of ``outputs`` but for columnLineage), serialized."""

    __slots__ = ("column_lineage_key", "description", "entry", "fields", "head")

    def __init__(
        self,
        dataset: InputDataset | OutputDataset | DatasetJson,
        fields: tuple[DatasetField, ...] | str,
        facets: dict[str, Any],
    ) -> None:
        self.fields = fields
        self.description = dataset.description
        serialized = orjson.dumps({"namespace": dataset.namespace, "name": dataset.name, "facets": facets})
        self.entry = orjson.Fragment(serialized)
        self.head = memoryview(serialized)[:-2]  # without the "}}" that closes the facets and the entry
        self.column_lineage_key = b',"columnLineage":' if facets else b'"columnLineage":'


class _DatasetCache:
    """The facets of the datasets seen lately, reused by later events naming the same dataset.

    A dataset is typically named by the event of the job that writes it and by the events of the jobs
    that read it, which the graph yields soon after (a few pages apart at most). Its schema and
    documentation facets are built once and its whole ``inputs`` entry serialized once (an orjson
    fragment, which orjson copies verbatim), instead of once per event; its ``outputs`` entry is those
    bytes with the job's columnLineage spliced into the facets (one serialized copy per dataset). An entry
    is reused only when the dataset's fields and description equal the cached ones (an identity check
    first: the store shares one tuple of fields per dataset within a page), so a dataset that changed
    between two pages is rebuilt, never served stale. The oldest entries are dropped beyond
    ``capacity``: memory stays flat.
    """

    def __init__(self, producer: str, capacity: int) -> None:
        self._producer = producer
        self._capacity = max(1, capacity)
        self._entries: dict[tuple[str, str], _CachedDataset] = {}

    def get(self, dataset: InputDataset | OutputDataset) -> _CachedDataset:
        entry = self._entries.get((dataset.namespace, dataset.name))
        if entry is not None and entry.fields is dataset.fields and entry.description == dataset.description:
            return entry
        return self._miss(dataset, entry)

    def _miss(self, dataset: InputDataset | OutputDataset, entry: _CachedDataset | None) -> _CachedDataset:
        if entry is not None and entry.description == dataset.description and entry.fields == dataset.fields:
            entry.fields = dataset.fields  # later events of this page hit the identity check
            return entry
        producer = self._producer
        facets: dict[str, Any] = {}
        fields = dataset.fields
        if fields:
            facets["schema"] = {
                "_producer": producer,
                "_schemaURL": SCHEMA_URL,
                # The store's fields are in the spec's shape: as they are, unless one has no type.
                "fields": fields
                if all(map(contains, fields, repeat("type")))  # in C: this runs for every dataset
                else [_schema_field(f, True) for f in fields],
            }
        if dataset.description is not None:
            facets["documentation"] = {
                "_producer": producer,
                "_schemaURL": DATASET_DOCUMENTATION_URL,
                "description": dataset.description,
            }
        return self._keep((dataset.namespace, dataset.name), _CachedDataset(dataset, dataset.fields, facets))

    def get_json(self, dataset: DatasetJson) -> _CachedDataset:
        """:meth:`get` for a dataset read with its fields in JSON (their string, shared within a page,
        takes the place of the tuple of fields)."""
        entry = self._entries.get((dataset.namespace, dataset.name))
        fields_json = dataset.fields_json
        if entry is not None and entry.fields is fields_json and entry.description == dataset.description:
            return entry
        if entry is not None and entry.description == dataset.description and entry.fields == fields_json:
            entry.fields = fields_json
            return entry
        producer = self._producer
        facets: dict[str, Any] = {}
        if len(fields_json) > 2:  # not "[]"; every field has its type already (UNKNOWN when none)
            facets["schema"] = {
                "_producer": producer,
                "_schemaURL": SCHEMA_URL,
                "fields": orjson.Fragment(fields_json),
            }
        if dataset.description is not None:
            facets["documentation"] = {
                "_producer": producer,
                "_schemaURL": DATASET_DOCUMENTATION_URL,
                "description": dataset.description,
            }
        return self._keep((dataset.namespace, dataset.name), _CachedDataset(dataset, fields_json, facets))

    def _keep(self, key: tuple[str, str], entry: _CachedDataset) -> _CachedDataset:
        entries = self._entries
        entries.pop(key, None)
        if len(entries) >= self._capacity:
            del entries[next(iter(entries))]
        entries[key] = entry
        return entry


def _column_lineage(dataset: OutputDataset, producer: str) -> dict[str, Any]:
    """The columnLineage facet with every detail: what :func:`_output` builds with :data:`FULL`.

    The store hands over column lineage in the spec's shape already (``fields`` and ``dataset``), so
    the facet is those very dicts under the facet's two keys: nothing is built per column.
    """
    if dataset.dataset_dependencies:
        return {
            "_producer": producer,
            "_schemaURL": COLUMN_LINEAGE_URL,
            "fields": dataset.column_lineage,
            "dataset": dataset.dataset_dependencies,
        }
    return {"_producer": producer, "_schemaURL": COLUMN_LINEAGE_URL, "fields": dataset.column_lineage}


def _job_facets(job: JobLineage | JobJson, producer: str, detail: Detail) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if job.description is not None and detail.descriptions:
        facets["documentation"] = {
            "_producer": producer,
            "_schemaURL": JOB_DOCUMENTATION_URL,
            "description": job.description,
        }
    if job.sql is not None and detail.sql:
        sql: dict[str, Any] = {"_producer": producer, "_schemaURL": SQL_URL, "query": job.sql}
        if job.sql_dialect is not None:
            sql["dialect"] = job.sql_dialect
        facets["sql"] = sql
    if job.processing_type is not None and job.integration is not None:
        job_type: dict[str, Any] = {
            "_producer": producer,
            "_schemaURL": JOB_TYPE_URL,
            "processingType": job.processing_type,
            "integration": job.integration,
        }
        if job.job_type is not None:
            job_type["jobType"] = job.job_type
        facets["jobType"] = job_type
    return facets


def _input(dataset: InputDataset, producer: str, detail: Detail) -> dict[str, Any]:
    facets = _dataset_facets(dataset, producer, detail) if detail.input_facets else {}
    return {"namespace": dataset.namespace, "name": dataset.name, "facets": facets}


def _output(dataset: OutputDataset, facets: dict[str, Any], producer: str, detail: Detail) -> dict[str, Any]:
    """The output entry; ``facets`` holds its schema and documentation facets and gets columnLineage."""
    if detail.column_lineage and (dataset.column_lineage or dataset.dataset_dependencies):
        if detail.transformation_descriptions:
            facets["columnLineage"] = _column_lineage(dataset, producer)
        else:
            column_lineage: dict[str, Any] = {
                "_producer": producer,
                "_schemaURL": COLUMN_LINEAGE_URL,
                "fields": {
                    output_field: _without_explanations(inputs)
                    for output_field, inputs in dataset.column_lineage.items()
                },
            }
            if dataset.dataset_dependencies:
                column_lineage["dataset"] = _input_fields_without_explanations(dataset.dataset_dependencies)
            facets["columnLineage"] = column_lineage
    return {"namespace": dataset.namespace, "name": dataset.name, "facets": facets}


def _dataset_facets(dataset: InputDataset | OutputDataset, producer: str, detail: Detail) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if dataset.fields:
        with_descriptions = detail.descriptions
        facets["schema"] = {
            "_producer": producer,
            "_schemaURL": SCHEMA_URL,
            "fields": [_schema_field(f, with_descriptions) for f in dataset.fields],
        }
    if dataset.description is not None and detail.descriptions:
        facets["documentation"] = {
            "_producer": producer,
            "_schemaURL": DATASET_DOCUMENTATION_URL,
            "description": dataset.description,
        }
    return facets


def _schema_field(f: DatasetField, with_description: bool) -> DatasetField:
    """The field with a ``type`` (``UNKNOWN`` when never sent: consumers need one), in spec key order."""
    entry: DatasetField = {"name": f["name"], "type": f.get("type", UNKNOWN_FIELD_TYPE)}
    if with_description and "description" in f:
        entry["description"] = f["description"]
    return entry


def _without_explanations(inputs: FieldInputsJson) -> FieldInputsJson:
    return {"inputFields": _input_fields_without_explanations(inputs["inputFields"])}


def _input_fields_without_explanations(refs: list[InputFieldJson]) -> list[InputFieldJson]:
    """Copies of ``refs`` whose transformations have no ``description`` (step 4 of the size rule)."""
    return [
        {
            "namespace": ref["namespace"],
            "name": ref["name"],
            "field": ref["field"],
            "transformations": [_without_explanation(t) for t in ref["transformations"]],
        }
        for ref in refs
    ]


def _without_explanation(t: TransformationJson) -> TransformationJson:
    stripped = t.copy()
    stripped.pop("description", None)
    return stripped


__all__ = [
    "EVENT_SCHEMA_URL",
    "MAX_EVENT_BYTES",
    "PRODUCER",
    "Detail",
    "EventStats",
    "EventWriter",
    "format_event_time",
    "snapshot_run_id",
]
