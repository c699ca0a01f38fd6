"""One page of an organization's graph on PostgreSQL with its bulk already in JSON: the export's read.

The export turns the graph into JSON and nothing else; at 10k jobs, building the graph's dicts
(:mod:`lineage_core.lineage.graph_pages`) and serializing them again cost about 0.5 s of Python CPU, most
of generation's. Here PostgreSQL writes the JSON text of each schema field (joined into one string per
dataset) and of each column dependency's field and transformation, with ``to_json`` and concatenation
(``json_agg``/``json_build_object`` cost PostgreSQL several times as much); ``to_json`` escapes byte for
byte as orjson does (both escape ``"``, ``\\`` and the control characters alone, with the same short
forms and lowercase hex). Python only groups the fragments and joins them: one string per output's
column lineage. The fragments' keys are in the spec's order and a NULL value leaves its key out, as the
dicts of :mod:`lineage_core.lineage.graph` do, so :class:`~lineage_core.export.events.EventWriter` writes
the same bytes from a :class:`JobJson` as from the :class:`~lineage_core.lineage.graph.JobLineage` of the
same job. The cost moves to PostgreSQL (``to_json`` is about half of the column lineage query), which
runs on the other core: a page comes in two halves (jobs, links and fields; column lineage), each
fetched by a thread of :mod:`lineage_core.lineage.graph_prefetch` on a connection of its own.

Column lineage derived from SQL (rare: only jobs the derivation filled) is read as rows, merged with
the reported lineage as dicts (:func:`~lineage_core.lineage.graph.with_derived_lineage`), and written
back as JSON; :meth:`JobJson.as_job_lineage` gives the job as the graph's public type, for the events
that the size rule rebuilds with less detail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from lineage_core.lineage.graph import (
    FieldInputsJson,
    InputDataset,
    InputFieldJson,
    JobLineage,
    OutputDataset,
    with_derived_lineage,
)
from lineage_core.lineage.graph_pages import (
    _DERIVED_LINEAGE_SQL,
    _DERIVED_LINKS_SQL,
    _JOBS_SQL,
    _LINKS_SQL,
    Rows,
    _lineage_by_job,
)

# The page's jobs are the org's jobs with ids in (after, last], as in graph_pages: every query of a page
# selects by that range.

# The schema ``fields`` of the datasets whose ids are given, as the export writes them: one row per
# dataset, its fields joined in schema order (the index scan's order: no sort); NULL for a dataset without
# fields. A field no producer typed is "UNKNOWN" (events._schema_field).
_FIELDS_JSON_SQL = """
SELECT d.id, (
    SELECT string_agg(ordered.field, ',') FROM (
        SELECT '{"name":' || to_json(f.name)::text
               || ',"type":' || coalesce(to_json(f.type)::text, '"UNKNOWN"')
               || coalesce(',"description":' || to_json(f.description)::text, '') || '}' AS field
        FROM lineage_dataset_fields AS f WHERE f.dataset_id = d.id ORDER BY f.position
    ) AS ordered
)
FROM unnest(%(ids)s::integer[]) AS d(id)
"""

# Column lineage: the grouping keys (the output field as a JSON key; NULL: a dataset-level dependency),
# the input dataset, and the rest of the input field's JSON after its dataset's namespace and name: the
# field, and the row's transformation (none when its type is NULL: the producer sent none). to_json is
# most of this query's time: the spec's transformation types and subtypes, which need no escaping, are
# quoted as they are (any other value still goes through to_json).
_LINEAGE_JSON_SQL = """
SELECT c.job_id, c.output_dataset_id, to_json(c.output_field)::text, c.input_index, c.input_dataset_id,
       to_json(c.input_field)::text || ',"transformations":['
       || coalesce('{"type":' || CASE c.transformation_type
                                   WHEN 'DIRECT' THEN '"DIRECT"' WHEN 'INDIRECT' THEN '"INDIRECT"'
                                   ELSE to_json(c.transformation_type)::text END
                   || coalesce(',"subtype":' || CASE WHEN c.transformation_subtype IN (
                                   'IDENTITY', 'TRANSFORMATION', 'AGGREGATION', 'JOIN', 'FILTER',
                                   'GROUP_BY', 'SORT', 'WINDOW', 'CONDITIONAL'
                               ) THEN '"' || c.transformation_subtype || '"'
                               ELSE to_json(c.transformation_subtype)::text END, '')
                   || coalesce(',"masking":' || c.masking::text, '')
                   || coalesce(',"description":' || to_json(c.transformation_description)::text, '') || '}',
                   '')
       || ']}'
FROM lineage_column_lineage AS c JOIN lineage_jobs AS j ON j.id = c.job_id
WHERE j.organization_id = %(org)s AND j.id > %(after)s AND j.id <= %(last)s
ORDER BY c.job_id, c.position
"""
# What ends the field in that tail: a JSON string cannot hold it (its quotes are escaped).
_TRANSFORMATIONS_OPEN = ',"transformations":['


# A page's rows come in two halves, each fetched on a connection of its own at the same time (the
# lineage_core.lineage.graph_prefetch threads): the jobs and their datasets' fields, and the jobs' links
# and column lineage. Each half is about half of PostgreSQL's work, which takes two cores instead of one.
# Both halves page through the same jobs in the same snapshot, so their pages end at the same job.

_JOB_IDS_SQL = """
SELECT max(id) FROM (
    SELECT j.id FROM lineage_jobs AS j WHERE j.organization_id = %(org)s AND j.id > %(after)s
    ORDER BY j.id LIMIT %(limit)s
) AS page
"""


@dataclass(frozen=True, slots=True)
class JobsPage:
    """The first half of a page: its jobs, their links and the fields of every dataset they link."""

    jobs: Rows  # JOB_COLUMNS, by id
    links: Rows  # job id, direction, dataset id, namespace, name, description
    derived_links: Rows
    fields: dict[int, str]  # dataset id → its schema's ``fields`` array; datasets without fields left out

    @property
    def last_job_id(self) -> int:
        return int(self.jobs[-1][0])


class FieldsMemory:
    """The fields of the datasets the read fetched lately, so that a later page does not fetch them again.

    Within one snapshot a dataset's fields never change, and the jobs that read and write a dataset are
    usually close in the order of the read (a page or a few apart): about a fifth of a page's datasets
    were in the previous pages. Bounded to ``capacity`` datasets, the least recently used dropped. Used
    by one thread only (the one that fetches the pages).
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._fields: dict[int, str | None] = {}

    def fields(self, cursor: Any, dataset_ids: Iterable[int]) -> dict[int, str]:
        """``fields`` of :class:`JobsPage` for these datasets, fetching only those not remembered."""
        remembered = self._fields
        page: dict[int, str | None] = {}
        missing = []
        for dataset_id in dataset_ids:
            if dataset_id in remembered:
                page[dataset_id] = remembered.pop(dataset_id)  # put back last: the newest
            else:
                missing.append(dataset_id)
        if missing:
            cursor.execute(_FIELDS_JSON_SQL, {"ids": missing})
            for dataset_id, fields in cursor.fetchall():
                page[dataset_id] = None if fields is None else f"[{fields}]"
        remembered.update(page)
        while len(remembered) > self._capacity:
            del remembered[next(iter(remembered))]
        return {dataset_id: fields for dataset_id, fields in page.items() if fields is not None}


@dataclass(frozen=True, slots=True)
class LineagePage:
    """The second half of a page: the jobs' column lineage."""

    last_job_id: int
    lineage: Rows  # see _LINEAGE_JSON_SQL; by job, position
    derived_lineage: Rows  # graph_pages' rows (job id, then graph._LineageRow)


def fetch_jobs_page(
    cursor: Any, organization_id: int, after: int, batch_size: int, memory: FieldsMemory
) -> JobsPage | None:
    """The org's next ``batch_size`` jobs with ids above ``after``, their links and their datasets'
    fields; None when there are none. ``cursor`` is a psycopg cursor in the snapshot the read sees;
    ``memory`` is the same for every page of one read."""
    cursor.execute(_JOBS_SQL, {"org": organization_id, "after": after, "limit": batch_size})
    jobs = cursor.fetchall()
    if not jobs:
        return None
    page = {"org": organization_id, "after": after, "last": jobs[-1][0]}
    cursor.execute(_LINKS_SQL, page)
    links = cursor.fetchall()
    cursor.execute(_DERIVED_LINKS_SQL, page)
    derived_links = cursor.fetchall()
    dataset_ids = dict.fromkeys(row[2] for row in links)  # in order, once each
    dataset_ids.update(dict.fromkeys(row[2] for row in derived_links))
    return JobsPage(jobs, links, derived_links, memory.fields(cursor, dataset_ids))


def fetch_lineage_page(cursor: Any, organization_id: int, after: int, batch_size: int) -> LineagePage | None:
    """The column lineage of the jobs :func:`fetch_jobs_page` returns for the same arguments."""
    cursor.execute(_JOB_IDS_SQL, {"org": organization_id, "after": after, "limit": batch_size})
    last = cursor.fetchone()[0]
    if last is None:
        return None
    page = {"org": organization_id, "after": after, "last": last}
    cursor.execute(_LINEAGE_JSON_SQL, page)
    lineage = cursor.fetchall()
    cursor.execute(_DERIVED_LINEAGE_SQL, page)
    return LineagePage(int(last), lineage, cursor.fetchall())


# The (namespace, name) of datasets by id, in the read's snapshot: the few datasets a page's column
# lineage cites that none of its jobs links (usually none). Asked on the caller's own session.
NameLookup = Callable[[list[int]], Iterable[tuple[int, str, str]]]


@dataclass(frozen=True, slots=True)
class DatasetJson:
    """An input or output dataset with its schema's ``fields`` array in JSON (``"[]"``: no fields).

    Every dataset of a page with the same fields holds the very same string (the event writer's cache
    recognises a dataset it has seen by this identity).
    """

    namespace: str
    name: str
    description: str | None
    fields_json: str


@dataclass(frozen=True, slots=True)
class OutputJson(DatasetJson):
    """An output dataset with its columnLineage facet's ``fields`` object and ``dataset`` array in JSON
    (``"{}"`` and ``"[]"`` when there are none)."""

    column_lineage_json: str
    dataset_dependencies_json: str


NO_FIELDS = "[]"
NO_COLUMN_LINEAGE = "{}"
NO_DEPENDENCIES = "[]"


@dataclass(frozen=True, slots=True)
class JobJson:
    """A job as :class:`~lineage_core.lineage.graph.JobLineage`, its datasets' bulk in JSON."""

    id: int
    namespace: str
    name: str
    description: str | None
    sql: str | None
    sql_dialect: str | None
    processing_type: str | None
    integration: str | None
    job_type: str | None
    lineage_event_time: datetime | None
    inputs: tuple[DatasetJson, ...]
    outputs: tuple[OutputJson, ...]

    def as_job_lineage(self) -> JobLineage:
        """The same job as the graph's public type (fields typed ``UNKNOWN`` where no type was sent)."""
        return JobLineage(
            self.id,
            self.namespace,
            self.name,
            self.description,
            self.sql,
            self.sql_dialect,
            self.processing_type,
            self.integration,
            self.job_type,
            self.lineage_event_time,
            tuple(
                InputDataset(d.namespace, d.name, d.description, tuple(orjson.loads(d.fields_json)))
                for d in self.inputs
            ),
            tuple(
                OutputDataset(
                    d.namespace,
                    d.name,
                    d.description,
                    tuple(orjson.loads(d.fields_json)),
                    orjson.loads(d.column_lineage_json),
                    orjson.loads(d.dataset_dependencies_json),
                )
                for d in self.outputs
            ),
        )


# An output's column lineage while a page is grouped: output field (as a JSON key) → its input fields'
# JSON, and the dataset-level dependencies' JSON.
_Grouped = tuple[dict[str, list[str]], list[str]]
_NO_LINEAGE: dict[int, _Grouped] = {}


def build_json_page(jobs_page: JobsPage, page: LineagePage, lookup_names: NameLookup) -> Iterator[JobJson]:
    """The page's jobs, by ascending id: what ``graph_pages.build_page`` builds, the bulk in JSON."""
    if jobs_page.last_job_id != page.last_job_id:  # the same snapshot gives both halves the same jobs
        raise RuntimeError("the two halves of a page of the graph end at different jobs")
    names: dict[int, tuple[str, str]] = {}
    links_by_job = _links_by_job(jobs_page.links, names)
    derived_links_by_job = _links_by_job(jobs_page.derived_links, names)
    unnamed = {row[4] for row in page.lineage}.union(row[4] for row in page.derived_lineage).difference(names)
    if unnamed:
        names.update((row[0], (row[1], row[2])) for row in lookup_names(sorted(unnamed)))
    fields = jobs_page.fields
    lineage_by_job = _lineage_json_by_job(page.lineage, names)
    derived_by_job = _lineage_by_job(page.derived_lineage, names) if page.derived_lineage else {}
    for job in jobs_page.jobs:
        job_id = job[0]
        lineage = lineage_by_job.get(job_id, _NO_LINEAGE)
        derived = derived_by_job.get(job_id)
        inputs: list[DatasetJson] = []
        outputs: list[OutputJson] = []
        # Table lineage derived from SQL stands in only for a job whose producer declared none.
        links = links_by_job.get(job_id) or derived_links_by_job.get(job_id) or ()
        for direction, dataset_id, namespace, name, description in links:
            fields_json = fields.get(dataset_id, NO_FIELDS)
            if direction == "input":
                inputs.append(DatasetJson(namespace, name, description, fields_json))
                continue
            grouped = lineage.get(dataset_id)
            if derived is not None and dataset_id in derived:
                column_lineage, dependencies = _merged(grouped, derived[dataset_id])
            elif grouped is None:
                column_lineage, dependencies = NO_COLUMN_LINEAGE, NO_DEPENDENCIES
            else:
                column_lineage, dependencies = _joined(grouped)
            outputs.append(
                OutputJson(namespace, name, description, fields_json, column_lineage, dependencies)
            )
        (
            _,
            job_namespace,
            job_name,
            job_description,
            sql,
            dialect,
            processing,
            integration,
            job_type,
            event_time,
        ) = job
        yield JobJson(
            job_id,
            job_namespace,
            job_name,
            job_description,
            sql,
            dialect,
            processing,
            integration,
            job_type,
            None if event_time is None else event_time.astimezone(UTC),  # as UtcDateTime reads it
            tuple(inputs),
            tuple(outputs),
        )


_Link = tuple[str, int, str, str, str | None]  # direction, dataset id, namespace, name, description


def _links_by_job(rows: Rows, names: dict[int, tuple[str, str]]) -> dict[int, list[_Link]]:
    """Each job's inputs and outputs; records the (namespace, name) of every dataset in ``names``."""
    links_by_job: dict[int, list[_Link]] = {}
    for job_id, direction, dataset_id, namespace, name, description in rows:
        links_by_job.setdefault(job_id, []).append((direction, dataset_id, namespace, name, description))
        names[dataset_id] = (namespace, name)
    return links_by_job


def _lineage_json_by_job(rows: Rows, names: dict[int, tuple[str, str]]) -> dict[int, dict[int, _Grouped]]:
    """Column-lineage rows (by job, then position) → job id → output dataset id → its input fields' JSON.

    The grouping of ``graph_pages._lineage_by_job``: consecutive rows of a job with the same output
    dataset, output field and input index are one input field, with one transformation per row whose
    type is not NULL; an output field met again later gets the later input fields appended.

    This loop runs once per column dependency of the org (about 15 per job): nearly every row is an
    input field of its own with one transformation, so each row is written as a whole input field at
    once, and a rare second transformation of the same input is spliced into the one just written.
    """
    by_job: dict[int, dict[int, _Grouped]] = {}
    per_job: dict[int, _Grouped] = {}
    per_output: _Grouped = ({}, [])
    heads: dict[int, str] = {}  # input dataset id → '{"namespace":...,"name":...,"field":'
    refs: list[str] = []
    current_job = current_output = current_index = None
    current_key: str | None = None
    for job_id, output_id, output_key, input_index, input_id, tail in rows:
        if job_id != current_job:
            current_job, current_output = job_id, None
            per_job = by_job[job_id] = {}
        elif input_index == current_index and output_key == current_key and output_id == current_output:
            item = tail[tail.index(_TRANSFORMATIONS_OPEN) + len(_TRANSFORMATIONS_OPEN) : -2]
            if item:  # another transformation of the input field just written
                last = refs[-1]
                refs[-1] = f"{last[:-2]},{item}]}}" if last[-3] != "[" else f"{last[:-2]}{item}]}}"
            continue
        if output_id != current_output:
            current_output, current_key = output_id, None
            found_output = per_job.get(output_id)
            if found_output is None:
                found_output = per_job[output_id] = ({}, [])
            per_output = found_output
        if output_key != current_key or current_key is None:
            current_key = output_key
            if output_key is None:
                refs = per_output[1]
            else:
                found = per_output[0].get(output_key)
                if found is None:
                    found = per_output[0][output_key] = []
                refs = found
        current_index = input_index
        head = heads.get(input_id)
        if head is None:
            namespace, name = names[input_id]
            head = heads[input_id] = (
                f'{{"namespace":{orjson.dumps(namespace).decode()},"name":{orjson.dumps(name).decode()},"field":'
            )
        refs.append(head + tail)
    return by_job


def _joined(grouped: _Grouped) -> tuple[str, str]:
    """An output's columnLineage ``fields`` object and ``dataset`` array, in JSON."""
    per_field, dependencies = grouped
    fields_json = ",".join(
        f'{output_key}:{{"inputFields":[{",".join(refs)}]}}' for output_key, refs in per_field.items()
    )
    return f"{{{fields_json}}}", f"[{','.join(dependencies)}]"


def _merged(
    grouped: _Grouped | None, derived: tuple[dict[str, FieldInputsJson], list[InputFieldJson]]
) -> tuple[str, str]:
    """Reported lineage (JSON) merged with the derived (dicts) as the serial read merges them."""
    reported = None
    if grouped is not None:
        column_lineage, dependencies = _joined(grouped)
        reported = (orjson.loads(column_lineage), orjson.loads(dependencies))
    per_field, dataset = with_derived_lineage(reported, derived)
    return orjson.dumps(per_field).decode(), orjson.dumps(dataset).decode()
