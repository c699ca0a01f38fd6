"""One page of an organization's graph on PostgreSQL: fetched as plain rows, then built into jobs.

The two halves run on different threads in :mod:`lineage_core.lineage.graph_prefetch`: :func:`fetch_page`
runs the page's queries on a DBAPI cursor (psycopg's tuples, no SQLAlchemy result layer: at 10k jobs that
layer cost as much as psycopg's decoding), and :func:`build_page` turns the rows into
:class:`~lineage_core.lineage.graph.JobLineage` values in one pass per table, with the same grouping,
order and derived-lineage merge as :func:`~lineage_core.lineage.graph.iter_org_graph_serial`, so the two
reads yield equal jobs.

The queries are those of the serial read, compiled once for psycopg; the datasets a page's column
lineage cites without any job of the page listing them are named by the fetching thread (the building
thread has no connection to ask).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, cast

from sqlalchemy import Integer, Table, and_, any_, bindparam, select, union_all
from sqlalchemy.dialects import postgresql

from lineage_core.lineage.graph import (
    JOB_COLUMNS,
    DatasetField,
    FieldInputsJson,
    InputDataset,
    InputFieldJson,
    JobLineage,
    OutputDataset,
    TransformationJson,
    dataset_field,
    transformation,
    with_derived_lineage,
)
from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageDerivedColumnLineage,
    LineageDerivedJobDataset,
    LineageJob,
    LineageJobDataset,
)

_JOBS = cast(Table, LineageJob.__table__)
_DATASETS = cast(Table, LineageDataset.__table__)
_FIELDS = cast(Table, LineageDatasetField.__table__)
_JOB_DATASETS = cast(Table, LineageJobDataset.__table__)
_COLUMN_LINEAGE = cast(Table, LineageColumnLineage.__table__)
_DERIVED_LINEAGE = cast(Table, LineageDerivedColumnLineage.__table__)
_DERIVED_JOB_DATASETS = cast(Table, LineageDerivedJobDataset.__table__)

Rows = Sequence[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class PageRows:
    """Everything one page of jobs needs, as the database returned it (plain tuples)."""

    jobs: Rows  # JOB_COLUMNS, by id
    links: Rows  # job id, direction, dataset id, namespace, name, description; by job, direction, position
    derived_links: Rows  # the same, derived from SQL
    fields: Rows  # dataset id, name, type, description; by dataset, position
    lineage: Rows  # job id, then the columns of graph._LineageRow; by job, position
    derived_lineage: Rows  # the same, derived from SQL
    other_names: Rows  # dataset id, namespace, name: lineage inputs that no job of the page links

    @property
    def last_job_id(self) -> int:
        return int(self.jobs[-1][0])


def _compiled(statement: Any) -> str:
    return str(statement.compile(dialect=postgresql.psycopg.dialect()))  # type: ignore[no-untyped-call]


# The page is the org's jobs with ids in (after, last]: every query of a page selects by that range.
_IN_PAGE = and_(
    _JOBS.c.organization_id == bindparam("org"),
    _JOBS.c.id > bindparam("after"),
    _JOBS.c.id <= bindparam("last"),
)


def _links(table: Table) -> Any:
    return (
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
        .where(_IN_PAGE)
        .order_by(table.c.job_id, table.c.direction, table.c.position)
    )


def _linked_dataset_ids(table: Table) -> Any:
    return select(table.c.dataset_id).join(_JOBS, _JOBS.c.id == table.c.job_id).where(_IN_PAGE)


def _lineage(table: Table) -> Any:
    return (
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
        .where(_IN_PAGE)
        .order_by(table.c.job_id, table.c.position)
    )


_JOBS_SQL = _compiled(
    select(*JOB_COLUMNS)
    .where(_JOBS.c.organization_id == bindparam("org"), _JOBS.c.id > bindparam("after"))
    .order_by(_JOBS.c.id)
    .limit(bindparam("limit"))
)
_LINKS_SQL = _compiled(_links(_JOB_DATASETS))
_DERIVED_LINKS_SQL = _compiled(_links(_DERIVED_JOB_DATASETS))
_FIELDS_SQL = _compiled(
    select(_FIELDS.c.dataset_id, _FIELDS.c.name, _FIELDS.c.type, _FIELDS.c.description)
    .where(
        _FIELDS.c.dataset_id.in_(
            union_all(_linked_dataset_ids(_JOB_DATASETS), _linked_dataset_ids(_DERIVED_JOB_DATASETS))
        )
    )
    .order_by(_FIELDS.c.dataset_id, _FIELDS.c.position)
)
_LINEAGE_SQL = _compiled(_lineage(_COLUMN_LINEAGE))
_DERIVED_LINEAGE_SQL = _compiled(_lineage(_DERIVED_LINEAGE))
_NAMES_SQL = _compiled(
    select(_DATASETS.c.id, _DATASETS.c.namespace, _DATASETS.c.name).where(
        _DATASETS.c.id == any_(bindparam("ids", type_=postgresql.ARRAY(Integer)))
    )
)


def fetch_page(cursor: Any, organization_id: int, after: int, batch_size: int) -> PageRows | None:
    """The rows of the org's next ``batch_size`` jobs with ids above ``after``; None when there are none.

    ``cursor`` is a psycopg cursor in the transaction (and snapshot) the read must see.
    """
    cursor.execute(_JOBS_SQL, {"org": organization_id, "after": after, "limit": batch_size})
    jobs = cursor.fetchall()
    if not jobs:
        return None
    page = {"org": organization_id, "after": after, "last": jobs[-1][0]}

    def rows(statement: str) -> Rows:
        cursor.execute(statement, page)
        return cast(Rows, cursor.fetchall())

    links, derived_links = rows(_LINKS_SQL), rows(_DERIVED_LINKS_SQL)
    lineage, derived_lineage = rows(_LINEAGE_SQL), rows(_DERIVED_LINEAGE_SQL)
    # Column lineage names its inputs by id; the page's links name nearly all of them. A set per page
    # finds the rest, which one more query names (usually there are none).
    named = {row[2] for row in links}.union(row[2] for row in derived_links)
    unnamed = {row[4] for row in lineage}.union(row[4] for row in derived_lineage).difference(named)
    other_names: Rows = ()
    if unnamed:
        cursor.execute(_NAMES_SQL, {"ids": sorted(unnamed)})
        other_names = cursor.fetchall()
    return PageRows(
        jobs=jobs,
        links=links,
        derived_links=derived_links,
        fields=rows(_FIELDS_SQL),
        lineage=lineage,
        derived_lineage=derived_lineage,
        other_names=other_names,
    )


_Link = tuple[str, int, str, str, str | None]  # direction, dataset id, namespace, name, description
_Lineage = tuple[dict[str, FieldInputsJson], list[InputFieldJson]]  # columnLineage: fields, dataset


def build_page(page: PageRows) -> Iterator[JobLineage]:
    """The page's jobs, by ascending id, equal to what the serial read builds from the same rows."""
    names: dict[int, tuple[str, str]] = {row[0]: (row[1], row[2]) for row in page.other_names}
    links_by_job = _links_by_job(page.links, names)
    derived_links_by_job = _links_by_job(page.derived_links, names)
    fields = _fields_by_dataset(page.fields)
    lineage_by_job = _lineage_by_job(page.lineage, names)
    derived_by_job = _lineage_by_job(page.derived_lineage, names)
    no_lineage: dict[int, _Lineage] = {}
    for job in page.jobs:
        job_id = job[0]
        lineage = lineage_by_job.get(job_id, no_lineage)
        derived = derived_by_job.get(job_id, no_lineage)
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
        yield JobLineage(
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


def _links_by_job(rows: Rows, names: dict[int, tuple[str, str]]) -> dict[int, list[_Link]]:
    """Each job's inputs and outputs; records the (namespace, name) of every dataset in ``names``."""
    links_by_job: dict[int, list[_Link]] = {}
    for job_id, direction, dataset_id, namespace, name, description in rows:
        links_by_job.setdefault(job_id, []).append((direction, dataset_id, namespace, name, description))
        names[dataset_id] = (namespace, name)
    return links_by_job


def _fields_by_dataset(rows: Rows) -> dict[int, tuple[DatasetField, ...]]:
    """Each dataset's schema. One tuple per dataset, shared by every job of the page that names it (the
    event writer's cache recognises a dataset it has seen by this identity)."""
    field_lists: dict[int, list[DatasetField]] = {}
    current_id = None
    items: list[DatasetField] = []
    for dataset_id, name, type_, description in rows:
        if dataset_id != current_id:  # rows come by dataset: one dict lookup per dataset, not per field
            current_id = dataset_id
            items = field_lists[dataset_id] = []
        if type_ is not None and description is not None:  # the usual case
            items.append({"name": name, "type": type_, "description": description})
        else:
            items.append(dataset_field(name, type_, description))
    return {dataset_id: tuple(items) for dataset_id, items in field_lists.items()}


def _lineage_by_job(rows: Rows, names: dict[int, tuple[str, str]]) -> dict[int, dict[int, _Lineage]]:
    """Column-lineage rows (by job, then position) → job id → output dataset id → its columnLineage
    ``fields`` and ``dataset``, in one pass over the page.

    The grouping of the serial read (``graph._lineage_by_output``): consecutive rows of a job with the
    same output dataset, output field and input index are one input field, with one transformation per
    row whose type is not NULL.
    """
    by_job: dict[int, dict[int, _Lineage]] = {}
    per_job: dict[int, _Lineage] = {}
    current_job = None
    ref_key: tuple[int, int, str | None, int] | None = None
    transformations: list[TransformationJson] = []
    for job_id, output_id, output_field, input_index, input_id, field, t_type, subtype, masking, text in rows:
        key = (job_id, output_id, output_field, input_index)
        if key != ref_key:
            ref_key = key
            if job_id != current_job:
                current_job = job_id
                per_job = by_job[job_id] = {}
            per_output = per_job.get(output_id)
            if per_output is None:
                per_output = per_job[output_id] = ({}, [])
            if output_field is None:
                refs = per_output[1]
            else:
                entry = per_output[0].get(output_field)
                if entry is None:
                    entry = per_output[0][output_field] = {"inputFields": []}
                refs = entry["inputFields"]
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
    return by_job
