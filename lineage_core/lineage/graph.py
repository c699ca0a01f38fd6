"""Read an organization's current lineage graph, job by job, in bounded memory (the export's input).

:func:`iter_org_graph` is the contract between the lineage store and the exporter. It yields one
:class:`JobLineage` per job, made of plain frozen dataclasses that hold no database state, so the
caller may keep, pickle or discard them freely.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any, cast

from sqlalchemy import Row, Table, and_, func, select
from sqlalchemy.orm import Session

from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageJob,
    LineageJobDataset,
)
from lineage_core.lineage.statements import CUSTOM_PLANS

_JOBS = cast(Table, LineageJob.__table__)
_DATASETS = cast(Table, LineageDataset.__table__)
_FIELDS = cast(Table, LineageDatasetField.__table__)
_JOB_DATASETS = cast(Table, LineageJobDataset.__table__)
_COLUMN_LINEAGE = cast(Table, LineageColumnLineage.__table__)


@dataclass(frozen=True, slots=True)
class DatasetField:
    """A field of a dataset's current schema. ``type`` and ``description`` are None when never sent."""

    name: str
    type: str | None
    description: str | None


@dataclass(frozen=True, slots=True)
class Transformation:
    """How an input field feeds an output field (spec: ``transformations[*]``)."""

    type: str  # "DIRECT" or "INDIRECT"
    subtype: str | None  # e.g. IDENTITY, TRANSFORMATION, AGGREGATION, JOIN, FILTER, GROUP_BY, SORT
    masking: bool | None
    description: str | None  # the text explanation of the transformation


@dataclass(frozen=True, slots=True)
class InputFieldRef:
    """An input dataset's field that an output depends on (spec: ``inputFields[*]`` / ``dataset[*]``)."""

    namespace: str
    name: str
    field: str
    transformations: tuple[Transformation, ...]  # may be empty: the producer sent none


@dataclass(frozen=True, slots=True)
class FieldLineage:
    """The input fields of one output field (spec: ``columnLineage.fields[field]``)."""

    field: str
    input_fields: tuple[InputFieldRef, ...]


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
    column_lineage: tuple[FieldLineage, ...]  # in the order the producer listed the output fields
    dataset_dependencies: tuple[InputFieldRef, ...]  # spec: columnLineage.dataset


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

    Memory: bounded by one page of ``batch_size`` jobs (their datasets, fields and lineage rows), never
    by the size of the organization. Each page costs four queries, whatever the number of jobs in it:
    the page of jobs (keyset pagination on ``(organization_id, id)``, no OFFSET), their input/output
    datasets, those datasets' fields, and their column lineage. Results are plain Core rows, so the
    session's identity map does not grow either.

    On PostgreSQL it sets ``plan_cache_mode = force_custom_plan`` with SET LOCAL, i.e. for the rest of
    the caller's transaction, so that each page's queries are planned for the tables as they are.

    Consistency: each query sees the data committed when it runs. For a snapshot in which every job is
    as of one instant, call it inside a REPEATABLE READ transaction on PostgreSQL, e.g.
    ``session.connection(execution_options={"isolation_level": "REPEATABLE READ"})`` before the first
    ``next()``. Jobs created while the iteration runs may or may not be included. The function never
    commits nor ends the session's transaction; close the generator (or exhaust it) before reusing it.

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
    if session.get_bind().dialect.name == "postgresql":
        # Same reason as in merge.apply_event: a generic plan made while the tables were small (or never
        # analyzed) would scan them whole on every page.
        session.execute(CUSTOM_PLANS)
    after = 0
    while True:
        jobs = session.execute(
            select(_JOBS)
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


def _build_page(session: Session, jobs: Sequence[Row[Any]], in_page: Any) -> Iterator[JobLineage]:
    links = session.execute(
        select(
            _JOB_DATASETS.c.job_id,
            _JOB_DATASETS.c.direction,
            _DATASETS.c.id,
            _DATASETS.c.namespace,
            _DATASETS.c.name,
            _DATASETS.c.description,
        )
        .join(_JOBS, _JOBS.c.id == _JOB_DATASETS.c.job_id)
        .join(_DATASETS, _DATASETS.c.id == _JOB_DATASETS.c.dataset_id)
        .where(in_page)
        .order_by(_JOB_DATASETS.c.job_id, _JOB_DATASETS.c.direction, _JOB_DATASETS.c.position)
    ).all()
    page_datasets = (
        select(_JOB_DATASETS.c.dataset_id).join(_JOBS, _JOBS.c.id == _JOB_DATASETS.c.job_id).where(in_page)
    )
    fields: dict[int, tuple[DatasetField, ...]] = {
        dataset_id: tuple(DatasetField(r.name, r.type, r.description) for r in rows)
        for dataset_id, rows in groupby(
            session.execute(
                select(_FIELDS.c.dataset_id, _FIELDS.c.name, _FIELDS.c.type, _FIELDS.c.description)
                .where(_FIELDS.c.dataset_id.in_(page_datasets))
                .order_by(_FIELDS.c.dataset_id, _FIELDS.c.position)
            ),
            key=lambda r: r.dataset_id,
        )
    }
    lineage_rows = session.execute(
        select(
            _COLUMN_LINEAGE.c.job_id,
            _COLUMN_LINEAGE.c.output_dataset_id,
            _COLUMN_LINEAGE.c.output_field,
            _COLUMN_LINEAGE.c.input_index,
            _DATASETS.c.namespace,
            _DATASETS.c.name,
            _COLUMN_LINEAGE.c.input_field,
            _COLUMN_LINEAGE.c.transformation_type,
            _COLUMN_LINEAGE.c.transformation_subtype,
            _COLUMN_LINEAGE.c.masking,
            _COLUMN_LINEAGE.c.transformation_description,
        )
        .join(_JOBS, _JOBS.c.id == _COLUMN_LINEAGE.c.job_id)
        .join(_DATASETS, _DATASETS.c.id == _COLUMN_LINEAGE.c.input_dataset_id)
        .where(in_page)
        .order_by(_COLUMN_LINEAGE.c.job_id, _COLUMN_LINEAGE.c.position)
    ).all()

    links_by_job = {job_id: list(rows) for job_id, rows in groupby(links, key=lambda r: r.job_id)}
    lineage_by_job = {job_id: list(rows) for job_id, rows in groupby(lineage_rows, key=lambda r: r.job_id)}
    for job in jobs:
        lineage = _lineage_by_output(lineage_by_job.get(job.id, []))
        inputs: list[InputDataset] = []
        outputs: list[OutputDataset] = []
        for link in links_by_job.get(job.id, []):
            dataset_fields = fields.get(link.id, ())
            if link.direction == "input":
                inputs.append(InputDataset(link.namespace, link.name, link.description, dataset_fields))
            else:
                per_field, dependencies = lineage.get(link.id, ((), ()))
                outputs.append(
                    OutputDataset(
                        link.namespace, link.name, link.description, dataset_fields, per_field, dependencies
                    )
                )
        yield JobLineage(
            id=job.id,
            namespace=job.namespace,
            name=job.name,
            description=job.description,
            sql=job.sql,
            sql_dialect=job.sql_dialect,
            processing_type=job.processing_type,
            integration=job.integration,
            job_type=job.job_type,
            lineage_event_time=job.lineage_event_time,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
        )


def _lineage_by_output(
    rows: list[Row[Any]],
) -> dict[int, tuple[tuple[FieldLineage, ...], tuple[InputFieldRef, ...]]]:
    """Rows of one job (in position order) → per output dataset id: (field lineage, dataset-level deps)."""
    result: dict[int, tuple[tuple[FieldLineage, ...], tuple[InputFieldRef, ...]]] = {}
    for output_id, output_rows in groupby(rows, key=lambda r: r.output_dataset_id):
        per_field: list[FieldLineage] = []
        dependencies: tuple[InputFieldRef, ...] = ()
        for output_field, field_rows in groupby(output_rows, key=lambda r: r.output_field):
            refs = tuple(
                _input_field_ref(list(entry_rows))
                for _index, entry_rows in groupby(field_rows, key=lambda r: r.input_index)
            )
            if output_field is None:
                dependencies = refs
            else:
                per_field.append(FieldLineage(output_field, refs))
        result[output_id] = (tuple(per_field), dependencies)
    return result


def _input_field_ref(rows: list[Row[Any]]) -> InputFieldRef:
    first = rows[0]
    transformations = tuple(
        Transformation(
            r.transformation_type, r.transformation_subtype, r.masking, r.transformation_description
        )
        for r in rows
        if r.transformation_type is not None
    )
    return InputFieldRef(first.namespace, first.name, first.input_field, transformations)
