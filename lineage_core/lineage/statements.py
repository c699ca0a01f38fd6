"""The merge's SQL statements, built once.

Building a SQLAlchemy statement (and its cache key) costs more CPU than PostgreSQL spends running most
of these; the merge runs about a dozen per event, so they are module constants or cached per shape and
take their values as bound parameters.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Delete,
    Integer,
    Select,
    Table,
    TextClause,
    Update,
    bindparam,
    delete,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageJob,
    LineageJobDataset,
)

JOBS = cast(Table, LineageJob.__table__)
DATASETS = cast(Table, LineageDataset.__table__)
FIELDS = cast(Table, LineageDatasetField.__table__)
JOB_DATASETS = cast(Table, LineageJobDataset.__table__)
COLUMN_LINEAGE = cast(Table, LineageColumnLineage.__table__)

JOB_STATE = (
    JOBS.c.id,
    JOBS.c.lineage_version,
    JOBS.c.documentation_version,
    JOBS.c.sql_version,
    JOBS.c.job_type_version,
)
DATASET_STATE = (
    DATASETS.c.id,
    DATASETS.c.namespace,
    DATASETS.c.name,
    DATASETS.c.schema_version,
    DATASETS.c.documentation_version,
)

# PostgreSQL only, first in each event's transaction; see merge.apply_event for why.
CUSTOM_PLANS = text("SET LOCAL plan_cache_mode = force_custom_plan")

# FOR NO KEY UPDATE, not FOR UPDATE: it serializes the writers of a row just the same, but does not
# conflict with the KEY SHARE locks that foreign-key checks take on it whenever a row referencing it is
# inserted; with FOR UPDATE, those two kinds of locks deadlocked concurrent events. Our UPDATEs change no
# key, so this lock is all they need.
JOB_FOR_UPDATE: Select[Any] = (
    select(*JOB_STATE)
    .where(
        JOBS.c.organization_id == bindparam("org"),
        JOBS.c.namespace == bindparam("ns"),
        JOBS.c.name == bindparam("name"),
    )
    .with_for_update(key_share=True)
)
# Values: any job columns, as parameters next to "job_id".
JOB_UPDATE: Update = update(JOBS).where(JOBS.c.id == bindparam("job_id"))
DELETE_JOB_DATASETS: Delete = delete(JOB_DATASETS).where(JOB_DATASETS.c.job_id == bindparam("job_id"))
DELETE_COLUMN_LINEAGE: Delete = delete(COLUMN_LINEAGE).where(COLUMN_LINEAGE.c.job_id == bindparam("job_id"))
DELETE_FIELDS: Delete = delete(FIELDS).where(FIELDS.c.dataset_id.in_(bindparam("ids", expanding=True)))
# Locked in id order, so that two transactions never wait for each other's datasets in a cycle.
DATASETS_FOR_UPDATE: Select[Any] = (
    select(*DATASET_STATE)
    .where(DATASETS.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(DATASETS.c.id)
    .with_for_update(key_share=True)
)
# Values: any dataset columns, as parameters next to "dataset_id"; executemany-friendly.
DATASET_UPDATE: Update = update(DATASETS).where(DATASETS.c.id == bindparam("dataset_id"))


def _insert_ignoring_duplicates(table: Table, dialect: str) -> Any:
    """An INSERT that skips rows hitting a unique constraint (a concurrent insert of the same key)."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise NotImplementedError(dialect)  # pragma: no cover - the product supports PostgreSQL and SQLite


@lru_cache(maxsize=4)
def job_insert(dialect: str) -> Any:
    """Creates a job (parameters org, ns, name, now); returns its state, or nothing if it exists."""
    return (
        _insert_ignoring_duplicates(JOBS, dialect)
        .values(
            organization_id=bindparam("org"),
            namespace=bindparam("ns"),
            name=bindparam("name"),
            created_at=bindparam("now"),
            updated_at=bindparam("now"),
        )
        .returning(*JOB_STATE)
    )


@lru_cache(maxsize=4)
def dataset_insert(dialect: str) -> Any:
    """Creates datasets (executemany of organization_id, namespace, name); returns the created ones."""
    return _insert_ignoring_duplicates(DATASETS, dialect).returning(*DATASET_STATE)


@lru_cache(maxsize=128)
def dataset_lookup(count: int) -> Any:
    """The state of ``count`` datasets of one organization (parameters org, ns0, name0, ns1, ...).

    One equality lookup per dataset, UNION ALL-ed: each arm is an exact match on the unique index,
    whatever the table statistics. A row-value IN list got a plan scanning every dataset of the
    organization on a table that had not been analyzed yet.
    """
    arms = [
        select(*DATASET_STATE).where(
            DATASETS.c.organization_id == bindparam("org"),
            DATASETS.c.namespace == bindparam(f"ns{index}"),
            DATASETS.c.name == bindparam(f"name{index}"),
        )
        for index in range(count)
    ]
    return arms[0] if count == 1 else union_all(*arms)


@lru_cache(maxsize=16)
def bulk_insert(table_name: str, columns: tuple[str, ...]) -> TextClause:
    """PostgreSQL: INSERT rows given as one array per column (parameters ``a_<column>``).

    One statement of fixed text (parsed and planned once per connection) and one round trip, where
    executemany sends an INSERT per row and a multi-row VALUES statement has a new text for every
    row count. Measured on the synthetic events (~60 lineage rows each): the largest single saving.
    """
    table = {t.name: t for t in (FIELDS, JOB_DATASETS, COLUMN_LINEAGE)}[table_name]
    arrays = ", ".join(f"CAST(:a_{name} AS {_pg_array_type(table.c[name])})" for name in columns)
    return text(f"INSERT INTO {table_name} ({', '.join(columns)}) SELECT * FROM unnest({arrays})")  # noqa: S608


def _pg_array_type(column: Any) -> str:
    # The column types of the lineage tables: integers, booleans and character data.
    if isinstance(column.type, Integer):
        return "integer[]"
    if isinstance(column.type, Boolean):
        return "boolean[]"
    return "text[]"
