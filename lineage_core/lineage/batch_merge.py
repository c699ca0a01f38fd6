"""Merge a batch of checked events into an organization's graph with a few set-based statements.

PostgreSQL only (SQLite applies events one by one with :func:`lineage_core.lineage.merge.apply_event`).

Every replaceable part of the graph (a job's lineage, each of its facets, each dataset facet) is
last-writer-wins under the total order of :mod:`versions`, and parts are independent of one another.
So the graph after a batch is the graph after its events applied one by one, in any order: each part
ends at the largest version among the one it holds and those the batch carries. :func:`apply_batch`

1. takes, per part, the batch's winner (the largest version);
2. locks the batch's jobs in key order, creating the missing ones already holding their winners (rows a
   concurrent batch created are locked after it commits);
3. creates the datasets the winners need, holding their winning facets: those with facets, and those of
   a job's lineage when it is replaced (not those of lineage that loses within the batch, nor of a
   refresh);
4. locks, in id order, the existing datasets whose facets the batch supersedes;
5. writes the winners only: a job's datasets and column lineage are replaced when the winner's content
   differs from what the job holds, a schema's fields likewise; a winner with the held content only
   moves the version (a refresh);
6. answers, per event, what applying the batch's events one by one in their order would have answered
   (the single-event API's answer for each).

The caller owns the transaction (and issues :data:`batch_sql.MERGE_PLANNER` first in it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from sqlalchemy import TextClause
from sqlalchemy.orm import Session

from lineage_core.infra import driver_sql
from lineage_core.infra.models import utcnow
from lineage_core.lineage import batch_sql, versions
from lineage_core.lineage import statements as sql
from lineage_core.lineage.event import DELETED, Deleted, Event, Field
from lineage_core.lineage.merge import (
    ApplyResult,
    DatasetKey,
    LineageOutcome,
    column_lineage_rows,
    dataset_facets_of,
    field_rows,
    job_dataset_rows,
    job_facet_columns,
    lineage_datasets,
)

JobKey = tuple[str, str]
# The job facets, in the order the answers list them, with the column holding each one's version.
JOB_FACETS = (
    ("documentation", "documentation_version"),
    ("sql", "sql_version"),
    ("jobType", "job_type_version"),
)


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """An event with the versions of each part it carries, computed once (outside the transaction)."""

    event: Event
    job_key: JobKey | None
    lineage_version: str | None  # None: the event carries no lineage (merge rule 2)
    job_facets: tuple[tuple[int, str, Any], ...]  # (index in JOB_FACETS, version, content)
    # Per dataset: (schema version, schema), (documentation version, documentation); None when absent.
    dataset_facets: tuple[
        tuple[DatasetKey, tuple[str, tuple[Field, ...] | Deleted] | None, tuple[str, str | Deleted] | None],
        ...,
    ]


def prepare(event: Event) -> PreparedEvent:
    """The versions of everything ``event`` carries (SHA-256 fingerprints: each computed once here)."""
    job = event.job
    job_facets: list[tuple[int, str, Any]] = []
    if job is not None:
        for index, content in enumerate((job.documentation, job.sql, job.job_type)):
            if content is not None:
                job_facets.append((index, event.facet_version(content), content))
    dataset_facets = tuple(
        (
            key,
            (event.facet_version(facets.schema), facets.schema) if facets.schema is not None else None,
            (event.facet_version(facets.documentation), facets.documentation)
            if facets.documentation is not None
            else None,
        )
        for key, facets in dataset_facets_of(event).items()
    )
    return PreparedEvent(
        event=event,
        job_key=(job.namespace, job.name) if job is not None else None,
        lineage_version=event.lineage_version() if event.carries_lineage else None,
        job_facets=tuple(job_facets),
        dataset_facets=dataset_facets,
    )


@dataclass(slots=True)
class _Winners:
    """Per part, the largest version the batch carries and what carries it."""

    lineage: dict[JobKey, tuple[str, Event]] = field(default_factory=dict)
    job_facets: dict[tuple[JobKey, int], tuple[str, Any]] = field(default_factory=dict)
    schemas: dict[DatasetKey, tuple[str, tuple[Field, ...] | Deleted]] = field(default_factory=dict)
    documentation: dict[DatasetKey, tuple[str, str | Deleted]] = field(default_factory=dict)

    @classmethod
    def of(cls, batch: Sequence[PreparedEvent]) -> _Winners:
        winners = cls()
        for prepared in batch:
            key = prepared.job_key
            if key is not None:
                if prepared.lineage_version is not None:
                    _keep_max(winners.lineage, key, prepared.lineage_version, prepared.event)
                for index, version, content in prepared.job_facets:
                    _keep_max(winners.job_facets, (key, index), version, content)
            for dataset_key, schema, documentation in prepared.dataset_facets:
                if schema is not None:
                    _keep_max(winners.schemas, dataset_key, *schema)
                if documentation is not None:
                    _keep_max(winners.documentation, dataset_key, *documentation)
        return winners


def _keep_max(table: dict[Any, tuple[str, Any]], key: Any, version: str, value: Any) -> None:
    held = table.get(key)
    if held is None or version > held[0]:
        table[key] = (version, value)


def apply_batch(session: Session, organization_id: int, batch: Sequence[PreparedEvent]) -> list[ApplyResult]:
    """Merge ``batch`` into the organization's graph in the session's transaction (no commit).

    Returns one result per event, in order: what the event did when the batch's events are taken one
    by one in their order (a later event of the batch may supersede what an earlier one wrote).

    Raises:
        sqlalchemy.exc.DBAPIError: a database error; the caller must roll back the transaction.
    """
    if not batch:
        return []
    now = utcnow()
    winners = _Winners.of(batch)
    arrival: dict[JobKey, int] = {}
    for prepared in batch:
        if prepared.job_key is not None:
            arrival.setdefault(prepared.job_key, len(arrival))
    jobs, created_jobs = _lock_jobs(session, organization_id, arrival, winners, now)

    replaced = {
        key: event
        for key, (version, event) in winners.lineage.items()
        if versions.supersedes(version, jobs[key].lineage_version)
        and not versions.same_content(version, jobs[key].lineage_version)
    }
    wanted: set[DatasetKey] = set(winners.schemas) | set(winners.documentation)
    for event in replaced.values():
        wanted.update(lineage_datasets(event))
    datasets, created_datasets = _ensure_datasets(session, organization_id, sorted(wanted), winners, now)
    candidates = sorted(
        row.id
        for key, row in datasets.items()
        if key not in created_datasets  # created with the winners' state, and locked, by this transaction
        and (
            (key in winners.schemas and versions.supersedes(winners.schemas[key][0], row.schema_version))
            or (
                key in winners.documentation
                and versions.supersedes(winners.documentation[key][0], row.documentation_version)
            )
        )
    )
    if candidates:
        # Versions only grow: a facet the unlocked read showed as stale stays stale; the others are
        # compared again with what the lock lets us see.
        for row in driver_sql.run(session, batch_sql.LOCK_DATASETS, {"ids": candidates}):
            datasets[(row.namespace, row.name)] = row

    results = _answers(batch, jobs, datasets)
    dataset_ids = {key: row.id for key, row in datasets.items()}
    _write_jobs(session, jobs, created_jobs, winners, replaced, dataset_ids, now)
    _write_datasets(session, datasets, created_datasets, winners, now)
    return results


# -- reading and locking -------------------------------------------------------------------------------


def _keys_json(keys: Sequence[tuple[str, str]], arrival: dict[JobKey, int] | None = None) -> dict[str, Any]:
    """The :keys parameter (the keys in the order given, ``ord``, with each job's arrival order) and
    :key_count."""
    rows = [
        {"ns": ns, "name": name, "ord": ord_, "arrival": arrival[(ns, name)] if arrival else None}
        for ord_, (ns, name) in enumerate(keys)
    ]
    return {"keys": orjson.dumps(rows).decode(), "key_count": len(rows)}


def _rows_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The :rows parameter of an UPDATE, with :row_count (see :mod:`batch_sql`)."""
    return {"rows": orjson.dumps(rows).decode(), "row_count": len(rows)}


def _insert_json(session: Session, table: Any, rows: list[dict[str, Any]]) -> None:
    statement = batch_sql.insert_json_rows(table.name, tuple(rows[0]))
    driver_sql.run(session, statement, {"rows": orjson.dumps(rows).decode()})


class _Created(NamedTuple):
    """The state, as the merge compares it, of a job or dataset this transaction created: none held.

    Its row already holds the batch's winners (written by the INSERT that created it, instead of an
    INSERT and then an UPDATE of the same row); the answers compare with this state.
    """

    id: int
    namespace: str
    name: str
    lineage_version: str | None = None
    documentation_version: str | None = None
    sql_version: str | None = None
    job_type_version: str | None = None
    schema_version: str | None = None


# A row as a lookup reads it (a named tuple: lineage_core.infra.driver_sql), or one this transaction created.
State = Any


def _lock_jobs(
    session: Session, organization_id: int, arrival: dict[JobKey, int], winners: _Winners, now: datetime
) -> tuple[dict[JobKey, State], set[JobKey]]:
    """The state of the batch's jobs (``arrival``: key -> order of first appearance), locked in key
    order until the transaction ends, and the keys of the missing ones, created (with the winners)."""
    return _find_or_create(
        session,
        organization_id,
        sorted(arrival),
        batch_sql.LOCK_JOBS,
        batch_sql.INSERT_JOBS,
        lambda key: {"arrival": arrival[key]} | (_job_update(key, _Created(0, *key), winners, {}) or {}),
        now,
    )


def _ensure_datasets(
    session: Session, organization_id: int, keys: list[DatasetKey], winners: _Winners, now: datetime
) -> tuple[dict[DatasetKey, State], set[DatasetKey]]:
    """The state (unlocked) of the datasets ``keys`` (sorted), and the keys of the missing ones, created
    in key order (with the winners' facets: locked by this transaction until it ends)."""
    return _find_or_create(
        session,
        organization_id,
        keys,
        batch_sql.READ_DATASETS,
        batch_sql.INSERT_DATASETS,
        lambda key: _dataset_update(key, _Created(0, *key), winners)[0] or {},
        now,
    )


def _find_or_create(
    session: Session,
    organization_id: int,
    keys: list[tuple[str, str]],
    lookup: TextClause,
    insert: TextClause,
    content: Callable[[tuple[str, str]], dict[str, Any]],
    now: datetime,
) -> tuple[dict[tuple[str, str], State], set[tuple[str, str]]]:
    """The rows of ``keys`` (sorted) as ``lookup`` reads them, and the keys of the missing ones, which
    ``insert`` creates in key order with the columns ``content`` gives. A row another transaction
    created since the first read is read again with ``lookup`` (which waits for it to commit)."""
    if not keys:
        return {}, set()
    found: dict[tuple[str, str], State] = {
        (row.namespace, row.name): row
        for row in driver_sql.run(session, lookup, {"org": organization_id, **_keys_json(keys)})
    }
    created: set[tuple[str, str]] = set()
    missing = [key for key in keys if key not in found]
    if not missing:
        return found, created
    rows = [{"ns": key[0], "name": key[1], "ord": ord_} | content(key) for ord_, key in enumerate(missing)]
    params = {"org": organization_id, "now": now, "keys": orjson.dumps(rows).decode()}
    for row in driver_sql.run(session, insert, params):
        key = (row.namespace, row.name)
        found[key] = _Created(row.id, *key)
        created.add(key)
    raced = [key for key in missing if key not in found]
    if raced:  # created by a concurrent transaction since our first read: wait for it, then read it
        params = {"org": organization_id, **_keys_json(raced)}
        found.update({(row.namespace, row.name): row for row in driver_sql.run(session, lookup, params)})
    return found, created


# -- answers ----------------------------------------------------------------------------------------------


def _answers(
    batch: Sequence[PreparedEvent], jobs: dict[JobKey, State], datasets: dict[DatasetKey, State]
) -> list[ApplyResult]:
    """What each event does when the batch is applied one by one in order, from the held versions.

    The same decisions as :func:`lineage_core.lineage.merge.apply_event`, on versions only: the held
    version of each part moves as the events before supersede it.
    """
    lineage: dict[JobKey, str | None] = {}
    job_facets: dict[tuple[JobKey, int], str | None] = {}
    schemas: dict[DatasetKey, str | None] = {}
    documentation: dict[DatasetKey, str | None] = {}
    results = []
    for prepared in batch:
        outcome = LineageOutcome.NOT_CARRIED
        changed_facets: list[str] = []
        key = prepared.job_key
        if key is not None:
            job = jobs[key]
            if prepared.lineage_version is not None:
                version = prepared.lineage_version
                held = lineage.get(key, job.lineage_version)
                if version == held:
                    outcome = LineageOutcome.UNCHANGED
                elif not versions.supersedes(version, held):
                    outcome = LineageOutcome.STALE
                else:
                    same = versions.same_content(version, held)
                    outcome = LineageOutcome.REFRESHED if same else LineageOutcome.REPLACED
                    lineage[key] = version
            for index, version, _content in prepared.job_facets:
                name, column = JOB_FACETS[index]
                held = job_facets.get((key, index), getattr(job, column))
                if versions.supersedes(version, held):
                    job_facets[(key, index)] = version
                    if not versions.same_content(version, held):
                        changed_facets.append(name)
        changed_dataset_facets = 0
        for dataset_key, schema, docs in prepared.dataset_facets:
            row = datasets[dataset_key]
            for carried, moving, column in (
                (schema, schemas, "schema_version"),
                (docs, documentation, "documentation_version"),
            ):
                if carried is None:
                    continue
                held = moving.get(dataset_key, getattr(row, column))
                if versions.supersedes(carried[0], held):
                    moving[dataset_key] = carried[0]
                    changed_dataset_facets += not versions.same_content(carried[0], held)
        results.append(ApplyResult(outcome, tuple(changed_facets), changed_dataset_facets))
    return results


# -- writing ----------------------------------------------------------------------------------------------


def _job_update(
    key: JobKey, job: State, winners: _Winners, replaced: dict[JobKey, Event]
) -> dict[str, Any] | None:
    """The row of UPDATE_JOBS that moves ``job`` to the batch's winners; None if nothing moves.

    Version columns take the new version or the held one; a content column is set (with its ``set_``
    flag) only where the winner's content differs from the held content. The same values create a
    missing job (INSERT_JOBS reads the columns it writes and ignores the flags).
    """
    row: dict[str, Any] = {
        "id": job.id,
        "lineage_version": job.lineage_version,
        "set_lineage": False,
        "lineage_event_time": None,
        "touched": key in replaced,
    }
    moved = False
    lineage = winners.lineage.get(key)
    if lineage is not None and versions.supersedes(lineage[0], job.lineage_version):
        row.update(lineage_version=lineage[0], set_lineage=True, lineage_event_time=lineage[1].event_time)
        moved = True
    for index, (facet, column) in enumerate(JOB_FACETS):
        held = getattr(job, column)
        row[column] = held
        flag = "set_" + column.removesuffix("_version")
        row[flag] = False
        row.update(dict.fromkeys(_FACET_CONTENT_COLUMNS[index]))
        winner = winners.job_facets.get((key, index))
        if winner is None or not versions.supersedes(winner[0], held):
            continue
        row[column] = winner[0]
        moved = True
        if not versions.same_content(winner[0], held):
            row[flag] = True
            row["touched"] = True
            row.update(job_facet_columns(facet, winner[1]))
    return row if moved else None


def _write_jobs(
    session: Session,
    jobs: dict[JobKey, State],
    created: set[JobKey],
    winners: _Winners,
    replaced: dict[JobKey, Event],
    dataset_ids: dict[DatasetKey, int],
    now: datetime,
) -> None:
    updates = [
        row
        for key, job in jobs.items()
        if key not in created and (row := _job_update(key, job, winners, replaced)) is not None
    ]
    replaced_ids = [jobs[key].id for key in replaced if jobs[key].lineage_version is not None]
    if replaced_ids:  # a job that never had lineage has no rows to delete
        driver_sql.run(session, batch_sql.DELETE_JOB_DATASETS, {"ids": replaced_ids})
        driver_sql.run(session, batch_sql.DELETE_COLUMN_LINEAGE, {"ids": replaced_ids})
    links: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for key, event in replaced.items():
        links.extend(job_dataset_rows(jobs[key].id, event, dataset_ids))
        edges.extend(column_lineage_rows(jobs[key].id, event, dataset_ids))
    if links:
        _insert_json(session, sql.JOB_DATASETS, links)
    if edges:
        _insert_json(session, sql.COLUMN_LINEAGE, edges)
    if updates:
        driver_sql.run(session, batch_sql.UPDATE_JOBS, _rows_json(updates) | {"now": now})


# The content columns each job facet writes (see merge.job_facet_columns), NULL unless it changes.
_FACET_CONTENT_COLUMNS = (
    ("description",),
    ("sql", "sql_dialect"),
    ("processing_type", "integration", "job_type"),
)


def _dataset_update(
    key: DatasetKey, held: State, winners: _Winners
) -> tuple[dict[str, Any] | None, bool, tuple[Field, ...] | None]:
    """For ``held`` and the batch's winners: the row of UPDATE_DATASETS (None if nothing moves), whether
    its fields must be deleted, and the fields to insert (None: the schema's content does not change).

    The same values create a missing dataset (INSERT_DATASETS reads the columns it writes).
    """
    row: dict[str, Any] = {
        "id": held.id,
        "schema_version": held.schema_version,
        "documentation_version": held.documentation_version,
        "set_documentation": False,
        "description": None,
        "touched": False,
    }
    moved = delete_fields = False
    fields: tuple[Field, ...] | None = None
    schema = winners.schemas.get(key)
    if schema is not None and versions.supersedes(schema[0], held.schema_version):
        row["schema_version"] = schema[0]
        moved = True
        if not versions.same_content(schema[0], held.schema_version):
            row["touched"] = True
            delete_fields = held.schema_version is not None  # fields exist only once a schema was applied
            fields = () if schema[1] is DELETED else schema[1]
    docs = winners.documentation.get(key)
    if docs is not None and versions.supersedes(docs[0], held.documentation_version):
        row["documentation_version"] = docs[0]
        moved = True
        if not versions.same_content(docs[0], held.documentation_version):
            row.update(
                touched=True, set_documentation=True, description=None if docs[1] is DELETED else docs[1]
            )
    return (row if moved else None), delete_fields, fields


def _write_datasets(
    session: Session,
    datasets: dict[DatasetKey, State],
    created: set[DatasetKey],
    winners: _Winners,
    now: datetime,
) -> None:
    updates: list[dict[str, Any]] = []
    replaced_schemas: list[int] = []
    new_fields: list[dict[str, Any]] = []
    for key, held in datasets.items():
        row, delete_fields, fields = _dataset_update(key, held, winners)
        if delete_fields:
            replaced_schemas.append(held.id)
        if fields is not None:
            new_fields.extend(field_rows(held.id, fields))
        if row is not None and key not in created:  # a created row holds the winners already
            updates.append(row)
    if replaced_schemas:
        driver_sql.run(session, batch_sql.DELETE_FIELDS, {"ids": replaced_schemas})
    if new_fields:
        _insert_json(session, sql.FIELDS, new_fields)
    if updates:
        driver_sql.run(session, batch_sql.UPDATE_DATASETS, _rows_json(updates) | {"now": now})
