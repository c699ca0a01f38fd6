"""Apply one checked event to an organization's current lineage graph.

Merge rules (the README's "Merge rules" section says the same for users):

1. The newest event (by ``eventTime``) that carries a job's inputs and outputs defines the job's
   current inputs, outputs and column lineage, all three replaced together.
2. An event carries them when it lists at least one input or output and is not a FAIL or ABORT: a START
   or RUNNING without datasets, and a run that failed or was aborted, leave the held lineage alone.
3. Dataset facets (``schema``, ``documentation``) update the dataset, each on its own: the newest
   event carrying a facet sets it, whatever kind of event it is (a DatasetEvent, or a dataset listed as
   input or output of a RunEvent or JobEvent). A dataset listed twice in one event takes its facets
   from the last listing, so an output's schema (after the write) wins over the same table as input.
4. Job facets (``documentation``, ``sql``, ``jobType``) update the job the same way.
5. An event older than the state held for a part changes nothing of that part; ``"_deleted": true``
   on a facet clears it (if that event is the newest for the facet).
6. Posting the same event again changes nothing (same version, see :mod:`versions`).

:func:`apply_event` writes in the caller's transaction and never commits: the caller commits once, so
an event is applied entirely or not at all. Concurrent events are safe on PostgreSQL: the job's row is
locked first, the datasets whose facets change last and in id order, both with FOR NO KEY UPDATE (which
foreign-key checks do not conflict with), so two transactions never wait on each other in a cycle
through these rows (a deadlock that would still happen is retried by
:func:`lineage_core.lineage.ingest.store_event`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, insert
from sqlalchemy.orm import Session

from lineage_core.infra.models import utcnow
from lineage_core.lineage import statements as sql
from lineage_core.lineage import versions
from lineage_core.lineage.event import DELETED, Dataset, Deleted, Event, Field, JobType, Sql

DatasetKey = tuple[str, str]
_LOOKUP_CHUNK = 100  # datasets per lookup statement


class LineageOutcome(enum.StrEnum):
    """What an event did to its job's inputs, outputs and column lineage."""

    REPLACED = "replaced"  # they are now the ones this event carries
    REFRESHED = "refreshed"  # identical to those held; the job now records this newer eventTime
    UNCHANGED = "unchanged"  # the held lineage came from this very event (a repeat)
    STALE = "stale"  # the job holds lineage from a newer event, which is kept
    NOT_CARRIED = "not_carried"  # the event carries no lineage (see rule 2) or is a DatasetEvent


@dataclass(frozen=True, slots=True)
class ApplyResult:
    lineage: LineageOutcome
    job_facets: tuple[str, ...]  # job facets whose content changed, e.g. ("sql", "documentation")
    dataset_facets: int  # dataset facets (schema or documentation) whose content changed

    @property
    def changed(self) -> bool:
        """Whether the graph's content (not just its bookkeeping) changed."""
        return self.lineage is LineageOutcome.REPLACED or bool(self.job_facets) or self.dataset_facets > 0


def apply_event(session: Session, organization_id: int, event: Event) -> ApplyResult:
    """Merge ``event`` into the organization's graph, in the session's transaction (no commit).

    Raises:
        sqlalchemy.exc.DBAPIError: a database error; the caller must roll back the transaction.
    """
    now = utcnow()
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        # Plan each statement for the tables as they are now. psycopg prepares repeated statements, and
        # PostgreSQL then settles on a generic plan; one made while the tables were small (a new
        # database, or statistics not refreshed: autovacuum off or behind) scans them whole for ever.
        # Measured: throughput halved every few thousand events without this. SET LOCAL ends with the
        # transaction.
        session.execute(sql.CUSTOM_PLANS)
    wanted_facets = dataset_facets_of(event)
    job = _lock_job(session, dialect, organization_id, event, now) if event.job is not None else None
    lineage = _lineage_outcome(job, event)
    # Only the datasets this event will write about: a stale or repeated event creates no rows.
    keys = set(wanted_facets)
    if lineage is LineageOutcome.REPLACED:
        keys.update(lineage_datasets(event))
    datasets = ensure_datasets(session, dialect, organization_id, sorted(keys), now)

    job_facets: tuple[str, ...] = ()
    if job is not None:
        job_values: dict[str, Any] = {}
        if lineage in (LineageOutcome.REPLACED, LineageOutcome.REFRESHED):
            job_values.update(lineage_version=event.lineage_version(), lineage_event_time=event.event_time)
        if lineage is LineageOutcome.REPLACED:
            ids = {key: row.id for key, row in datasets.items()}
            _replace_lineage(session, dialect, job, event, ids)
        job_facets = _job_facet_values(job, event, job_values)
        if lineage is LineageOutcome.REPLACED or job_facets:
            job_values["updated_at"] = now
        if job_values:
            session.execute(sql.JOB_UPDATE, {"job_id": job.id, **job_values})
    # Last, so that the locks on shared datasets (a popular input is in many events) are held only for
    # the end of the transaction.
    dataset_facets = _apply_dataset_facets(session, dialect, event, wanted_facets, datasets, now)
    return ApplyResult(lineage, job_facets, dataset_facets)


# -- rows ------------------------------------------------------------------------------------------------


def insert_rows(session: Session, dialect: str, table: Any, rows: list[dict[str, Any]]) -> None:
    """INSERT many rows of one shape with one statement (see :func:`statements.bulk_insert`)."""
    if dialect != "postgresql":
        # SQLite runs in-process: executemany costs no round trip per row.
        session.execute(insert(table), rows)
        return
    columns = tuple(rows[0])
    arrays = {f"a_{name}": [row[name] for row in rows] for name in columns}
    session.execute(sql.bulk_insert(table.name, columns), arrays)


def _lock_job(session: Session, dialect: str, organization_id: int, event: Event, now: datetime) -> Row[Any]:
    """The job's row (created if new), locked until the transaction ends."""
    assert event.job is not None
    key = {"org": organization_id, "ns": event.job.namespace, "name": event.job.name}
    row = session.execute(sql.JOB_FOR_UPDATE, key).one_or_none()
    if row is None:
        inserted = session.execute(sql.job_insert(dialect), {**key, "now": now}).one_or_none()
        # Nothing inserted: another transaction created the job since our SELECT; lock theirs.
        row = inserted if inserted is not None else session.execute(sql.JOB_FOR_UPDATE, key).one()
    return row


def lineage_datasets(event: Event) -> set[DatasetKey]:
    """Datasets the event's lineage refers to: inputs, outputs, and the inputs of its column lineage."""
    keys: set[DatasetKey] = {dataset.key for dataset in (*event.inputs, *event.outputs)}
    for output in event.outputs:
        if output.column_lineage is not None:
            for _field, inputs in output.column_lineage.fields:
                keys.update((i.namespace, i.name) for i in inputs)
            keys.update((i.namespace, i.name) for i in output.column_lineage.dataset)
    return keys


def ensure_datasets(
    session: Session, dialect: str, organization_id: int, keys: list[DatasetKey], now: datetime
) -> dict[DatasetKey, Row[Any]]:
    """The rows (id and facet versions, unlocked) of the datasets ``keys`` (sorted), creating missing ones.

    Safe against a concurrent transaction creating the same datasets (it inserts ignoring duplicates,
    then looks up the rows the other one created). Used by the merge and by the derivation.
    """

    def lookup(wanted: list[DatasetKey]) -> dict[DatasetKey, Row[Any]]:
        found: dict[DatasetKey, Row[Any]] = {}
        for start in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[start : start + _LOOKUP_CHUNK]
            params: dict[str, Any] = {"org": organization_id}
            for index, (namespace, name) in enumerate(chunk):
                params[f"ns{index}"] = namespace
                params[f"name{index}"] = name
            rows = session.execute(sql.dataset_lookup(len(chunk)), params)
            found.update({(row.namespace, row.name): row for row in rows})
        return found

    if not keys:
        return {}
    found = lookup(keys)
    missing = [key for key in keys if key not in found]
    if missing:
        # Sorted, so two transactions creating overlapping sets insert in the same order. The rows we
        # insert come back; a row another transaction inserted meanwhile does not, and is looked up.
        inserted = session.execute(
            sql.dataset_insert(dialect),
            [
                {
                    "organization_id": organization_id,
                    "namespace": ns,
                    "name": name,
                    "created_at": now,
                    "updated_at": now,
                }
                for ns, name in missing
            ],
        )
        found.update({(row.namespace, row.name): row for row in inserted})
        raced = [key for key in missing if key not in found]
        if raced:
            found.update(lookup(raced))
    return found


# -- job lineage ------------------------------------------------------------------------------------------


def _lineage_outcome(job: Row[Any] | None, event: Event) -> LineageOutcome:
    """What the event does to the job's lineage, decided from the version the job holds."""
    if job is None or not event.carries_lineage:
        return LineageOutcome.NOT_CARRIED
    version = event.lineage_version()
    if version == job.lineage_version:
        return LineageOutcome.UNCHANGED
    if not versions.supersedes(version, job.lineage_version):
        return LineageOutcome.STALE
    if versions.same_content(version, job.lineage_version):
        return LineageOutcome.REFRESHED
    return LineageOutcome.REPLACED


def _replace_lineage(
    session: Session, dialect: str, job: Row[Any], event: Event, dataset_ids: dict[DatasetKey, int]
) -> None:
    """The job's inputs, outputs and column lineage become the event's."""
    job_id = job.id
    if job.lineage_version is not None:  # a job that never had lineage has no rows to delete
        session.execute(sql.DELETE_JOB_DATASETS, {"job_id": job_id})
        session.execute(sql.DELETE_COLUMN_LINEAGE, {"job_id": job_id})
    links = job_dataset_rows(job_id, event, dataset_ids)
    if links:
        insert_rows(session, dialect, sql.JOB_DATASETS, links)
    lineage_rows = column_lineage_rows(job_id, event, dataset_ids)
    if lineage_rows:
        insert_rows(session, dialect, sql.COLUMN_LINEAGE, lineage_rows)


def _unique(datasets: Iterable[Dataset]) -> list[Dataset]:
    """The datasets in order, each key once (its first listing)."""
    seen: set[DatasetKey] = set()
    result = []
    for dataset in datasets:
        if dataset.key not in seen:
            seen.add(dataset.key)
            result.append(dataset)
    return result


def job_dataset_rows(job_id: int, event: Event, ids: dict[DatasetKey, int]) -> list[dict[str, Any]]:
    rows = []
    for direction, datasets in (("input", event.inputs), ("output", event.outputs)):
        for position, dataset in enumerate(_unique(datasets)):
            rows.append(
                {
                    "job_id": job_id,
                    "direction": direction,
                    "position": position,
                    "dataset_id": ids[dataset.key],
                }
            )
    return rows


def column_lineage_rows(job_id: int, event: Event, ids: dict[DatasetKey, int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    # An output listed twice keeps the first listing that has a columnLineage facet.
    lineage_by_output: dict[DatasetKey, Any] = {}
    for output in event.outputs:
        if output.column_lineage is not None:
            lineage_by_output.setdefault(output.key, output.column_lineage)
    for output_key, lineage in lineage_by_output.items():
        entries = [(name, inputs) for name, inputs in lineage.fields]
        entries.append((None, lineage.dataset))  # dataset-level dependencies: output_field NULL
        for output_field, inputs in entries:
            for input_index, source in enumerate(inputs):
                base = {
                    "job_id": job_id,
                    "output_dataset_id": ids[output_key],
                    "output_field": output_field,
                    "input_index": input_index,
                    "input_dataset_id": ids[(source.namespace, source.name)],
                    "input_field": source.field,
                }
                for t in source.transformations or (None,):
                    rows.append(
                        {
                            **base,
                            "position": len(rows),
                            "transformation_type": t.type if t else None,
                            "transformation_subtype": t.subtype if t else None,
                            "masking": t.masking if t else None,
                            "transformation_description": t.description if t else None,
                        }
                    )
    return rows


# -- facets ------------------------------------------------------------------------------------------------


def _job_facet_values(job: Row[Any], event: Event, job_values: dict[str, Any]) -> tuple[str, ...]:
    """Put the job facets this event supersedes into ``job_values``; the names of those that changed."""
    assert event.job is not None
    changed: list[str] = []
    slots: tuple[tuple[str, str, Any], ...] = (
        ("documentation", "documentation_version", event.job.documentation),
        ("sql", "sql_version", event.job.sql),
        ("jobType", "job_type_version", event.job.job_type),
    )
    for facet, version_column, content in slots:
        if content is None:
            continue
        version = event.facet_version(content)
        held = getattr(job, version_column)
        if not versions.supersedes(version, held):
            continue
        job_values[version_column] = version
        if not versions.same_content(version, held):
            job_values.update(job_facet_columns(facet, content))
            changed.append(facet)
    return tuple(changed)


def job_facet_columns(facet: str, content: str | Sql | JobType | Deleted) -> dict[str, Any]:
    if facet == "documentation":
        return {"description": None if content is DELETED else content}
    if facet == "sql":
        query = content if isinstance(content, Sql) else None
        return {"sql": query.query if query else None, "sql_dialect": query.dialect if query else None}
    job_type = content if isinstance(content, JobType) else None
    return {
        "processing_type": job_type.processing_type if job_type else None,
        "integration": job_type.integration if job_type else None,
        "job_type": job_type.job_type if job_type else None,
    }


@dataclass(slots=True)
class DatasetFacets:
    schema: tuple[Field, ...] | Deleted | None = None
    documentation: str | Deleted | None = None


def dataset_facets_of(event: Event) -> dict[DatasetKey, DatasetFacets]:
    """Per dataset, the facets to apply; a later listing of the same dataset overrides an earlier one."""
    result: dict[DatasetKey, DatasetFacets] = {}
    for dataset in event.datasets():
        if dataset.schema is None and dataset.documentation is None:
            continue
        facets = result.setdefault(dataset.key, DatasetFacets())
        if dataset.schema is not None:
            facets.schema = dataset.schema
        if dataset.documentation is not None:
            facets.documentation = dataset.documentation
    return result


def _apply_dataset_facets(
    session: Session,
    dialect: str,
    event: Event,
    wanted: dict[DatasetKey, DatasetFacets],
    datasets: dict[DatasetKey, Row[Any]],
    now: datetime,
) -> int:
    """Write the dataset facets this event supersedes; returns how many changed content.

    Versions only grow, so a facet the unlocked read already shows as stale stays stale. The others are
    read again under a row lock (in id order, after the job's), so that comparing versions and writing
    the new ones cannot interleave with another transaction doing the same for that dataset.
    """
    candidates = sorted(
        datasets[key].id for key, facets in wanted.items() if _supersedes_any(event, facets, datasets[key])
    )
    if not candidates:
        return 0
    locked = session.execute(sql.DATASETS_FOR_UPDATE, {"ids": candidates}).all()
    changed_total = 0
    replaced_schemas: list[int] = []
    new_fields: list[dict[str, Any]] = []
    updates: dict[frozenset[str], list[dict[str, Any]]] = {}
    for held in locked:
        facets = wanted[(held.namespace, held.name)]
        values: dict[str, Any] = {}
        changed = 0
        if facets.schema is not None:
            version = event.facet_version(facets.schema)
            if versions.supersedes(version, held.schema_version):
                values["schema_version"] = version
                if not versions.same_content(version, held.schema_version):
                    if held.schema_version is not None:  # fields exist only once a schema was applied
                        replaced_schemas.append(held.id)
                    new_fields.extend(field_rows(held.id, () if facets.schema is DELETED else facets.schema))
                    changed += 1
        if facets.documentation is not None:
            version = event.facet_version(facets.documentation)
            if versions.supersedes(version, held.documentation_version):
                values["documentation_version"] = version
                if not versions.same_content(version, held.documentation_version):
                    values["description"] = None if facets.documentation is DELETED else facets.documentation
                    changed += 1
        if changed:
            values["updated_at"] = now
            changed_total += changed
        if values:
            updates.setdefault(frozenset(values), []).append({"dataset_id": held.id, **values})
    if replaced_schemas:
        session.execute(sql.DELETE_FIELDS, {"ids": replaced_schemas})
    if new_fields:
        insert_rows(session, dialect, sql.FIELDS, new_fields)
    # One executemany per set of changed columns: psycopg pipelines it in a single round trip.
    for rows in updates.values():
        session.execute(sql.DATASET_UPDATE, rows)
    return changed_total


def _supersedes_any(event: Event, facets: DatasetFacets, held: Row[Any]) -> bool:
    return (
        facets.schema is not None
        and versions.supersedes(event.facet_version(facets.schema), held.schema_version)
    ) or (
        facets.documentation is not None
        and versions.supersedes(event.facet_version(facets.documentation), held.documentation_version)
    )


def field_rows(dataset_id: int, fields: Sequence[Field]) -> list[dict[str, Any]]:
    return [
        {
            "dataset_id": dataset_id,
            "position": position,
            "name": field.name,
            "type": field.type,
            "description": field.description,
        }
        for position, field in enumerate(fields)
    ]
