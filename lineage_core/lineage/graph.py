"""Read an organization's current lineage graph, job by job, in bounded memory (the export's input).

:func:`iter_org_graph` is the contract between the lineage store and the exporter. It yields one
:class:`JobLineage` per job, made of plain values that hold no database state, so the caller may keep,
pickle or discard them freely. Jobs and datasets are frozen dataclasses.

Schema fields and column lineage, the bulk of an org's graph (an entry per field, per output field,
input field and transformation), come already in the OpenLineage spec's shape: plain dicts typed by
the TypedDicts below, with the spec's keys, and with a key left out (never None) when the producer did
not send its value. The event writer puts them into the events as they are, and orjson serializes
dicts faster than anything built from them; a translation layer of objects cost more than the
serialization itself. They are shared with the events, so treat them as read-only.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from sqlalchemy import Row, Table, and_, func, select, union_all
from sqlalchemy.orm import Session

from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageDerivedColumnLineage,
    LineageDerivedJobDataset,
    LineageJob,
    LineageJobDataset,
)
from lineage_core.lineage.statements import CUSTOM_PLANS

if TYPE_CHECKING:  # graph_json builds this module's types
    from lineage_core.lineage.graph_json import JobJson

_JOBS = cast(Table, LineageJob.__table__)
_DATASETS = cast(Table, LineageDataset.__table__)
_FIELDS = cast(Table, LineageDatasetField.__table__)
_JOB_DATASETS = cast(Table, LineageJobDataset.__table__)
_COLUMN_LINEAGE = cast(Table, LineageColumnLineage.__table__)
_DERIVED_LINEAGE = cast(Table, LineageDerivedColumnLineage.__table__)
_DERIVED_JOB_DATASETS = cast(Table, LineageDerivedJobDataset.__table__)

# Ends the description of every transformation the store derived from the job's SQL (or of a producer's
# transformation whose missing description it derived): how a reader of the export tells ours apart.
DERIVED_MARK = " [derived from SQL]"


class DatasetField(TypedDict):
    """A field of a dataset's current schema (spec: the schema facet's ``fields[*]``).

    ``type`` and ``description`` are absent when no producer sent them. Nested fields stay flat, named
    ``parent.child``, as the store keeps them.
    """

    name: str
    type: NotRequired[str]
    description: NotRequired[str]


def dataset_field(name: str, type_: str | None = None, description: str | None = None) -> DatasetField:
    """A :class:`DatasetField` with the values that are not None."""
    item: DatasetField = {"name": name}
    if type_ is not None:
        item["type"] = type_
    if description is not None:
        item["description"] = description
    return item


class TransformationJson(TypedDict):
    """How an input field feeds an output field (spec: ``transformations[*]``)."""

    type: str  # "DIRECT" or "INDIRECT"
    subtype: NotRequired[str]  # e.g. IDENTITY, TRANSFORMATION, AGGREGATION, JOIN, FILTER, GROUP_BY, SORT
    masking: NotRequired[bool]
    description: NotRequired[str]  # the text explanation of the transformation


class InputFieldJson(TypedDict):
    """An input dataset's field that an output depends on (spec: ``inputFields[*]`` / ``dataset[*]``)."""

    namespace: str
    name: str
    field: str
    transformations: list[TransformationJson]  # may be empty: the producer sent none


class FieldInputsJson(TypedDict):
    """The input fields of one output field (spec: ``columnLineage.fields[<output field>]``)."""

    inputFields: list[InputFieldJson]  # the spec's key


def transformation(
    type_: str, subtype: str | None = None, masking: bool | None = None, description: str | None = None
) -> TransformationJson:
    """A :class:`TransformationJson` with the values that are not None."""
    item: TransformationJson = {"type": type_}
    if subtype is not None:
        item["subtype"] = subtype
    if masking is not None:
        item["masking"] = masking
    if description is not None:
        item["description"] = description
    return item


def input_field(
    namespace: str, name: str, field: str, transformations: Iterable[TransformationJson] = ()
) -> InputFieldJson:
    return {"namespace": namespace, "name": name, "field": field, "transformations": list(transformations)}


@dataclass(frozen=True, slots=True)
class InputDataset:
    namespace: str
    name: str
    description: str | None  # from the dataset's documentation facet
    fields: tuple[DatasetField, ...]  # current schema, in schema order; empty when none was sent


@dataclass(frozen=True, slots=True)
class OutputDataset:
    namespace: str
    name: str
    description: str | None
    fields: tuple[DatasetField, ...]
    # spec: columnLineage.fields, output field → its inputs, in the order the producer listed them
    column_lineage: dict[str, FieldInputsJson]
    dataset_dependencies: list[InputFieldJson]  # spec: columnLineage.dataset


@dataclass(frozen=True, slots=True)
class JobLineage:
    """One job with everything the export writes about it."""

    id: int  # the store's id; ascending order of iteration
    namespace: str
    name: str
    description: str | None  # job documentation facet
    sql: str | None  # sql facet: query
    sql_dialect: str | None  # sql facet: dialect
    processing_type: str | None  # jobType facet: processingType (BATCH, STREAMING, ...)
    integration: str | None  # jobType facet: integration (DBT, SPARK, AIRFLOW, ...)
    job_type: str | None  # jobType facet: jobType (QUERY, MODEL, TASK, ...)
    lineage_event_time: datetime | None  # eventTime of the event that defined inputs/outputs; None: never
    inputs: tuple[InputDataset, ...]
    outputs: tuple[OutputDataset, ...]


def count_org_jobs(session: Session, organization_id: int) -> int:
    """How many jobs :func:`iter_org_graph` would yield now (for progress reporting)."""
    query = select(func.count()).select_from(_JOBS).where(_JOBS.c.organization_id == organization_id)
    return int(session.execute(query).scalar_one())


def iter_org_graph(session: Session, organization_id: int, batch_size: int = 500) -> Iterator[JobLineage]:
    """Every job of the organization with its inputs, outputs, fields and column lineage, by ascending id.

    Memory: bounded by a few pages of ``batch_size`` jobs (their datasets, fields and lineage rows), never
    by the size of the organization. Each page is a fixed number of queries, whatever the number of jobs
    in it, with keyset pagination on ``(organization_id, id)`` (no OFFSET).

    On PostgreSQL the pages are fetched on a second connection, one page ahead, while the caller works
    on the current one (:mod:`lineage_core.lineage.graph_prefetch`); that connection imports the
    snapshot of the session's transaction, so the whole iteration sees the database as of the first
    ``next()``: one consistent snapshot of the org, whatever the session's isolation level. A session
    whose transaction has written reads serially on its own connection instead (its uncommitted rows
    are in no snapshot another connection can import), as does SQLite: see
    :func:`iter_org_graph_serial`. Both reads yield equal jobs from equal data.

    The function never commits nor ends the session's transaction; close the generator (or exhaust it)
    before reusing the session. Closing it stops and joins the fetching thread.

    Args:
        session: any session on the product's database (PostgreSQL or SQLite).
        organization_id: the organization whose graph to read; no row of another organization is read.
        batch_size: jobs per page, at least 1.

    Yields:
        JobLineage: inputs and outputs in the order of the event that defined them; each dataset's
        fields in schema order; column lineage in the order it was received.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    bind = session.get_bind()
    if bind.dialect.name == "postgresql":
        # Imported here: the prefetching read builds this module's types.
        from lineage_core.lineage.graph_prefetch import export_snapshot, iter_prefetched_graph

        snapshot = export_snapshot(session)
        if snapshot is not None:
            yield from iter_prefetched_graph(session, snapshot, organization_id, batch_size)
            return
    yield from iter_org_graph_serial(session, organization_id, batch_size)


def iter_org_graph_for_export(
    session: Session, organization_id: int, batch_size: int = 500
) -> Generator[JobLineage | JobJson, None, None]:
    """:func:`iter_org_graph` for the export: on PostgreSQL with a snapshot to share, the jobs come as
    :class:`~lineage_core.lineage.graph_json.JobJson`, their fields and column lineage already in JSON
    (PostgreSQL writes it; see that module), which the event writer splices into the events as they
    are; elsewhere, as :class:`JobLineage` from the serial read. The event writer writes the same bytes
    for both. Same snapshot, memory bounds and order as :func:`iter_org_graph`.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if session.get_bind().dialect.name == "postgresql":
        from lineage_core.lineage.graph_prefetch import export_snapshot, iter_prefetched_json_graph

        snapshot = export_snapshot(session)
        if snapshot is not None:
            yield from iter_prefetched_json_graph(session, snapshot, organization_id, batch_size)
            return
    yield from iter_org_graph_serial(session, organization_id, batch_size)


def iter_org_graph_serial(
    session: Session, organization_id: int, batch_size: int = 500
) -> Iterator[JobLineage]:
    """:func:`iter_org_graph` read on the session's own connection, one page after the other.

    The read of SQLite, and of a PostgreSQL transaction that has written. Memory: one page. Each page
    costs six queries: the page of jobs, their input/output datasets (reported, and derived from SQL),
    those datasets' fields, and their column lineage (reported, and derived from SQL); plus one per
    thousand datasets that the page's column lineage names without the jobs listing them as inputs
    (usually none). Results are plain Core rows, so the session's identity map does not grow either.

    On PostgreSQL it sets ``plan_cache_mode = force_custom_plan`` with SET LOCAL, i.e. for the rest of
    the caller's transaction, so that each page's queries are planned for the tables as they are.

    Consistency: each query sees the data committed when it runs. For a snapshot in which every job is
    as of one instant, call it inside a REPEATABLE READ transaction on PostgreSQL, e.g.
    ``session.connection(execution_options={"isolation_level": "REPEATABLE READ"})`` before the first
    ``next()``. Jobs created while the iteration runs may or may not be included.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if session.get_bind().dialect.name == "postgresql":
        # Same reason as in merge.apply_event: a generic plan made while the tables were small (or never
        # analyzed) would scan them whole on every page.
        session.execute(CUSTOM_PLANS)
    after = 0
    while True:
        jobs = session.execute(
            select(*JOB_COLUMNS)
            .where(_JOBS.c.organization_id == organization_id, _JOBS.c.id > after)
            .order_by(_JOBS.c.id)
            .limit(batch_size)
        ).all()
        if not jobs:
            return
        # Every other query of the page selects by this id range of the org's jobs: no long IN lists.
        in_page = and_(
            _JOBS.c.organization_id == organization_id, _JOBS.c.id > after, _JOBS.c.id <= jobs[-1].id
        )
        yield from _build_page(session, jobs, in_page)
        after = jobs[-1].id


# The job's columns in the order of JobLineage's fields from ``id`` to ``lineage_event_time``.
JOB_COLUMNS = tuple(
    _JOBS.c[name]
    for name in (
        "id",
        "namespace",
        "name",
        "description",
        "sql",
        "sql_dialect",
        "processing_type",
        "integration",
        "job_type",
        "lineage_event_time",
    )
)


def _build_page(session: Session, jobs: Sequence[Row[Any]], in_page: Any) -> Iterator[JobLineage]:
    links_by_job, names = _page_links(session, in_page, _JOB_DATASETS)
    derived_links_by_job, derived_names = _page_links(session, in_page, _DERIVED_JOB_DATASETS)
    names.update(derived_names)
    fields = _page_fields(session, in_page)
    lineage_by_job = _page_column_lineage(session, in_page, names, _COLUMN_LINEAGE)
    derived_by_job = _page_column_lineage(session, in_page, names, _DERIVED_LINEAGE)
    for job in jobs:
        job_id = job[0]
        job_rows = lineage_by_job.get(job_id)
        lineage = _lineage_by_output(job_rows, names) if job_rows else {}
        derived_rows = derived_by_job.get(job_id)
        derived = _lineage_by_output(derived_rows, names) if derived_rows else {}
        inputs: list[InputDataset] = []
        outputs: list[OutputDataset] = []
        # Table lineage derived from SQL stands in only for a job whose producer declared none.
        links = links_by_job.get(job_id) or derived_links_by_job.get(job_id) or ()
        for direction, dataset_id, namespace, name, description in links:
            dataset_fields = fields.get(dataset_id, ())
            if direction == "input":
                inputs.append(InputDataset(namespace, name, description, dataset_fields))
            else:
                per_field, dependencies = with_derived_lineage(
                    lineage.get(dataset_id), derived.get(dataset_id)
                )
                outputs.append(
                    OutputDataset(namespace, name, description, dataset_fields, per_field, dependencies)
                )
        yield JobLineage(*job, inputs=tuple(inputs), outputs=tuple(outputs))  # type: ignore[call-arg]


# The page's queries unpack rows as tuples: reading a Row's attribute by name costs about 15 times as
# much, and these loops touch every field and column dependency of the org. Each fetches its rows
# whole (``.all()``): iterating a result fetches one row per call.

_Link = tuple[str, int, str, str, str | None]  # direction, dataset id, namespace, name, description


def _page_links(
    session: Session, in_page: Any, table: Table
) -> tuple[dict[int, list[_Link]], dict[int, tuple[str, str]]]:
    """The page's inputs and outputs per job id, and the (namespace, name) of every dataset they name.

    ``table`` is the reported job datasets, or those derived from SQL (the same columns).
    """
    links_by_job: dict[int, list[_Link]] = {}
    names: dict[int, tuple[str, str]] = {}
    for job_id, direction, dataset_id, namespace, name, description in session.execute(
        select(
            table.c.job_id,
            table.c.direction,
            _DATASETS.c.id,
            _DATASETS.c.namespace,
            _DATASETS.c.name,
            _DATASETS.c.description,
        )
        .join(_JOBS, _JOBS.c.id == table.c.job_id)
        .join(_DATASETS, _DATASETS.c.id == table.c.dataset_id)
        .where(in_page)
        .order_by(table.c.job_id, table.c.direction, table.c.position)
    ).all():
        links_by_job.setdefault(job_id, []).append((direction, dataset_id, namespace, name, description))
        names[dataset_id] = (namespace, name)
    return links_by_job, names


def _page_fields(session: Session, in_page: Any) -> dict[int, tuple[DatasetField, ...]]:
    """The current schema of every dataset the page's jobs read or write, per dataset id."""
    page_datasets = union_all(
        *(
            select(table.c.dataset_id).join(_JOBS, _JOBS.c.id == table.c.job_id).where(in_page)
            for table in (_JOB_DATASETS, _DERIVED_JOB_DATASETS)
        )
    )
    field_lists: dict[int, list[DatasetField]] = {}
    for dataset_id, name, type_, description in session.execute(
        select(_FIELDS.c.dataset_id, _FIELDS.c.name, _FIELDS.c.type, _FIELDS.c.description)
        .where(_FIELDS.c.dataset_id.in_(page_datasets))
        .order_by(_FIELDS.c.dataset_id, _FIELDS.c.position)
    ).all():
        field: DatasetField
        if type_ is not None and description is not None:  # the usual case
            field = {"name": name, "type": type_, "description": description}
        else:
            field = dataset_field(name, type_, description)
        field_lists.setdefault(dataset_id, []).append(field)
    # One tuple per dataset, shared by every job of the page that names it (the event writer's cache
    # recognises a dataset it has seen by this identity).
    return {dataset_id: tuple(items) for dataset_id, items in field_lists.items()}


# One column-lineage row of a job: output dataset id, output field (None: a dataset-level dependency),
# input index, input dataset id and field, then the transformation's type (None: the producer sent none
# for this input), subtype, masking and description.
_LineageRow = tuple[int, str | None, int, int, str, str | None, str | None, bool | None, str | None]

_NAMES_PER_QUERY = 1000


def _page_column_lineage(
    session: Session, in_page: Any, names: dict[int, tuple[str, str]], table: Table
) -> dict[int, list[_LineageRow]]:
    """The page's column lineage rows per job id, in position order.

    ``table`` is the reported column lineage, or the one derived from SQL (the same columns).

    Input datasets come as ids, named from ``names`` (the page's inputs and outputs, which hold them
    nearly always): joining the datasets table here cost as much as the rest of the query. The few a
    job's lineage names without listing them as inputs are looked up afterwards and added to ``names``.
    """
    lineage_by_job: dict[int, list[_LineageRow]] = {}
    missing: set[int] = set()
    for job_id, *rest in session.execute(
        select(
            table.c.job_id,
            table.c.output_dataset_id,
            table.c.output_field,
            table.c.input_index,
            table.c.input_dataset_id,
            table.c.input_field,
            table.c.transformation_type,
            table.c.transformation_subtype,
            table.c.masking,
            table.c.transformation_description,
        )
        .join(_JOBS, _JOBS.c.id == table.c.job_id)
        .where(in_page)
        .order_by(table.c.job_id, table.c.position)
    ).all():
        lineage_by_job.setdefault(job_id, []).append(rest)  # type: ignore[arg-type]
        if rest[3] not in names:
            missing.add(rest[3])
    ids = sorted(missing)
    for start in range(0, len(ids), _NAMES_PER_QUERY):
        chunk = ids[start : start + _NAMES_PER_QUERY]
        for dataset_id, namespace, name in session.execute(
            select(_DATASETS.c.id, _DATASETS.c.namespace, _DATASETS.c.name).where(_DATASETS.c.id.in_(chunk))
        ).all():
            names[dataset_id] = (namespace, name)
    return lineage_by_job


def _lineage_by_output(
    rows: list[_LineageRow], names: dict[int, tuple[str, str]]
) -> dict[int, tuple[dict[str, FieldInputsJson], list[InputFieldJson]]]:
    """Rows of one job (in position order) → per output dataset id: (``fields``, ``dataset``) of its
    columnLineage facet.

    Consecutive rows with the same output dataset, output field and input index are one input field
    with one transformation per row (the store writes an input's transformations next to each other).
    """
    result: dict[int, tuple[dict[str, FieldInputsJson], list[InputFieldJson]]] = {}
    ref_key: tuple[int, str | None, int] | None = None
    transformations: list[TransformationJson] = []
    for output_id, output_field, input_index, input_id, field, t_type, subtype, masking, text in rows:
        key = (output_id, output_field, input_index)
        if key != ref_key:
            ref_key = key
            per_output = result.get(output_id)
            if per_output is None:
                per_output = result[output_id] = ({}, [])
            if output_field is None:
                refs = per_output[1]
            else:
                inputs = per_output[0].get(output_field)
                if inputs is None:
                    inputs = per_output[0][output_field] = {"inputFields": []}
                refs = inputs["inputFields"]
            namespace, name = names[input_id]
            transformations = []
            refs.append(
                {"namespace": namespace, "name": name, "field": field, "transformations": transformations}
            )
        if t_type is not None:
            if subtype is not None and masking is not None and text is not None:  # the usual case
                transformations.append(
                    {"type": t_type, "subtype": subtype, "masking": masking, "description": text}
                )
            else:
                transformations.append(transformation(t_type, subtype, masking, text))
    return result


_Lineage = tuple[dict[str, FieldInputsJson], list[InputFieldJson]]


def with_derived_lineage(reported: _Lineage | None, derived: _Lineage | None) -> _Lineage:
    """An output's column lineage: what the producer reported, with the gaps filled from the SQL.

    Reported lineage is kept exactly as sent. A derived entry is used only for an output field the
    producer sent no entry for, and the derived dataset-level dependencies only when the producer sent
    none; a producer's transformation without a description gets the derived one of the same input
    field and kind. Everything taken from the derivation ends with :data:`DERIVED_MARK`.
    """
    if derived is None:
        return reported or ({}, [])
    derived_fields, derived_dataset = derived
    for entry in derived_fields.values():
        _mark(entry["inputFields"])
    _mark(derived_dataset)
    if reported is None:
        return derived
    fields, dataset = reported
    for output_field, entry in fields.items():
        source = derived_fields.get(output_field)
        if source is not None:
            _fill_descriptions(entry["inputFields"], source["inputFields"])
    for output_field, entry in derived_fields.items():
        if output_field not in fields:
            fields[output_field] = entry
    if dataset:
        _fill_descriptions(dataset, derived_dataset)
    else:
        dataset = derived_dataset
    return fields, dataset


def _mark(refs: list[InputFieldJson]) -> None:
    for ref in refs:
        for item in ref["transformations"]:
            if "description" in item:
                item["description"] += DERIVED_MARK


def _fill_descriptions(refs: list[InputFieldJson], derived: list[InputFieldJson]) -> None:
    """Give the producer's transformations that have no description the derived one, if any."""
    explained: dict[tuple[str, str, str, str, str | None], str] = {}
    for ref in derived:
        for item in ref["transformations"]:
            if "description" in item:
                key = (ref["namespace"], ref["name"], ref["field"], item["type"], item.get("subtype"))
                explained.setdefault(key, item["description"])
                explained.setdefault((*key[:4], None), item["description"])
    for ref in refs:
        for item in ref["transformations"]:
            if "description" not in item:
                where = (ref["namespace"], ref["name"], ref["field"], item["type"])
                subtype = item.get("subtype")
                # The same kind only: a subtype the producer named must match; without one, any
                # derived transformation of that type and input field explains it.
                text = explained.get((*where, subtype)) if subtype else explained.get((*where, None))
                if text is not None:
                    item["description"] = text
