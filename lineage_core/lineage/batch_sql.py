"""PostgreSQL statements of the set-based batch merge (:mod:`lineage_core.lineage.batch_merge`).

Each statement has one fixed text whatever the batch's size: its rows arrive as one JSON array of
objects (``json_to_recordset``; ids as one integer array), so psycopg prepares it once per connection
and PostgreSQL runs it as one set operation. JSON rather than an array per column: psycopg dumps arrays
of strings element by element in Python (escaping each with a regular expression), measured as the
largest CPU cost of a 1000-event batch, where orjson writes the whole document in C.

PostgreSQL guesses that a set-returning function returns 100 rows, whatever the JSON holds. Against an
organization of a few thousand jobs that guess makes a hash join over all of them the cheapest plan, so
the one-event path read the whole organization per statement and grew slower with every job stored
(measured: 3.8 ms of database CPU per event at 1,000 jobs, 8.5 ms at 4,000). Every join therefore reads
its rows through ``LIMIT :n`` with the row count given: a custom plan (:data:`MERGE_PLANNER`) sees the
true count up to 100 and probes the unique indexes for a few keys.

Rows are created and locked in the order of their ``ord`` (``ORDER BY``), which the merge sorts by
key: two batches that share jobs or datasets take their row locks in the same order and cannot wait
for each other in a cycle.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Boolean, Integer, TextClause, text

from lineage_core.lineage import statements

# PostgreSQL only, first in each merge's transaction (one round trip; each setting ends with it):
# * custom plans: psycopg prepares repeated statements and PostgreSQL then settles on a generic plan; one
#   made while the tables were small (a new database, statistics not refreshed) scans them whole for
#   ever (measured: throughput halved every few thousand events without this);
# * no hash, merge or bitmap joins: every statement names its rows by key or id, and a nested loop of
#   index probes is the plan that reads only them. Estimates cannot be trusted to find it: with no
#   statistics PostgreSQL takes an organization for 0.5% of the table, small enough to read whole
#   through the ``(organization_id, updated_at)`` index and hash-join with the keys (measured: all
#   3,000 jobs of an organization read to find 4 of them, 2.4 ms).
MERGE_PLANNER: TextClause = text(
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true) AS plan_cache_mode, "
    "set_config('enable_hashjoin', 'off', true) AS enable_hashjoin, "
    "set_config('enable_mergejoin', 'off', true) AS enable_mergejoin, "
    "set_config('enable_bitmapscan', 'off', true) AS enable_bitmapscan"
)

# The state the merge compares versions with; the same columns in every job and dataset statement.
_JOB_STATE = (
    "j.id, j.namespace, j.name, j.lineage_version, j.documentation_version, j.sql_version, j.job_type_version"
)
_DATASET_STATE = "d.id, d.namespace, d.name, d.schema_version, d.documentation_version"
# :keys is [{"ns": ..., "name": ..., "ord": n}, ...], and :arrival (jobs only) the order each job was
# first named in the batch.
_KEY_RECORD = "k(ns text, name text, ord integer, arrival integer)"
_KEYS = f"json_to_recordset(CAST(:keys AS json)) AS {_KEY_RECORD}"
# The keys as a join reads them: with their count, for the planner's estimate (see the module's text).
_COUNTED_KEYS = f"(SELECT * FROM {_KEYS} LIMIT :key_count) AS k"  # noqa: S608 - constant text
# The organization as a join compares it: through a subquery, whose value the planner does not see.
# For a value it sees, it reads the column's statistics, and an organization created after the last
# ANALYZE is absent from them: estimated at one row, an index by organization alone (the schedule's
# ``(organization_id, updated_at)``) looked as cheap as the unique key, and each lookup read the whole
# organization (measured: 44,601 rows filtered, 78 ms, at 45,000 jobs). For a value it does not see it
# estimates an average organization, which only the unique key narrows to one row.
_ORG = "(SELECT CAST(:org AS integer))"


def _probe(table: str, alias: str, columns: str, lock: str = "") -> str:
    """One lookup by the unique key per key of :keys, in their order: a LATERAL subquery kept whole by
    its LIMIT (the key is unique: at most one row anyway), so it can only be the inner side of a nested
    loop, run once per key; the planner chooses only the index it probes."""
    return (
        f"SELECT {columns} FROM {_COUNTED_KEYS} CROSS JOIN LATERAL ("  # noqa: S608 - constant text
        f"SELECT {columns} FROM {table} AS {alias} WHERE {alias}.organization_id = {_ORG} "
        f"AND {alias}.namespace = k.ns AND {alias}.name = k.name LIMIT 1{lock}) AS {alias} ORDER BY k.ord"
    )


# FOR NO KEY UPDATE: see statements.JOB_FOR_UPDATE (foreign-key checks take KEY SHARE locks, which
# this lock does not conflict with). Each job is locked as it is found, in the order of the keys.
LOCK_JOBS: TextClause = text(_probe("lineage_jobs", "j", _JOB_STATE, lock=" FOR NO KEY UPDATE"))
# The columns a created job or dataset gets from the batch's winners (NULL where none): the row is
# written once, complete, rather than inserted and then updated.
_JOB_CONTENT = (
    ("lineage_version", "text"),
    ("lineage_event_time", "timestamptz"),
    ("documentation_version", "text"),
    ("description", "text"),
    ("sql_version", "text"),
    ("sql", "text"),
    ("sql_dialect", "text"),
    ("job_type_version", "text"),
    ("processing_type", "text"),
    ("integration", "text"),
    ("job_type", "text"),
)
_DATASET_CONTENT = (("schema_version", "text"), ("documentation_version", "text"), ("description", "text"))


def _new_rows(content: tuple[tuple[str, str], ...], arrival: bool) -> str:
    """:keys with the content columns: the rows to create (no join reads them: no count needed)."""
    record = ", ".join(f"{name} {kind}" for name, kind in content)
    order = ", arrival integer" if arrival else ""
    return f"json_to_recordset(CAST(:keys AS json)) AS k(ns text, name text, ord integer{order}, {record})"


def _names(columns: tuple[tuple[str, str], ...], prefix: str = "") -> str:
    return ", ".join(prefix + name for name, _kind in columns)


# The rows an INSERT creates are locked by it until the transaction ends; a row another transaction
# created meanwhile is skipped here and locked with LOCK_JOBS. Ids are drawn in the order the batch
# first names each job (:arrival), as one event per transaction did, so the export (in id order) lists
# jobs in the order they arrived; PostgreSQL evaluates nextval() after the subquery's sort. The rows are
# then inserted in key order (:ns, :name as sorted; ord), the order every writer takes.
INSERT_JOBS: TextClause = text(
    "INSERT INTO lineage_jobs AS j (id, organization_id, namespace, name, created_at, updated_at, "  # noqa: S608
    f"{_names(_JOB_CONTENT)}) "
    f"SELECT a.id, :org, a.ns, a.name, :now, :now, {_names(_JOB_CONTENT, 'a.')} FROM ("
    f"SELECT k.*, nextval(pg_get_serial_sequence('lineage_jobs', 'id')) AS id "
    f"FROM {_new_rows(_JOB_CONTENT, arrival=True)} ORDER BY k.arrival) AS a ORDER BY a.ord "
    "ON CONFLICT (organization_id, namespace, name) DO NOTHING RETURNING j.id, j.namespace, j.name"
)
READ_DATASETS: TextClause = text(_probe("lineage_datasets", "d", _DATASET_STATE))
INSERT_DATASETS: TextClause = text(
    "INSERT INTO lineage_datasets AS d (organization_id, namespace, name, created_at, updated_at, "  # noqa: S608
    f"{_names(_DATASET_CONTENT)}) "
    f"SELECT :org, k.ns, k.name, :now, :now, {_names(_DATASET_CONTENT, 'k.')} "
    f"FROM {_new_rows(_DATASET_CONTENT, arrival=False)} ORDER BY k.ord "
    "ON CONFLICT (organization_id, namespace, name) DO NOTHING RETURNING d.id, d.namespace, d.name"
)
# In id order, like the per-event merge: every writer of dataset facets locks in one order.
LOCK_DATASETS: TextClause = text(
    f"SELECT {_DATASET_STATE} FROM lineage_datasets AS d "  # noqa: S608
    "WHERE d.id = ANY(CAST(:ids AS integer[])) ORDER BY d.id FOR NO KEY UPDATE"
)
DELETE_JOB_DATASETS: TextClause = text(
    "DELETE FROM lineage_job_datasets WHERE job_id = ANY(CAST(:ids AS integer[]))"
)
DELETE_COLUMN_LINEAGE: TextClause = text(
    "DELETE FROM lineage_column_lineage WHERE job_id = ANY(CAST(:ids AS integer[]))"
)
DELETE_FIELDS: TextClause = text(
    "DELETE FROM lineage_dataset_fields WHERE dataset_id = ANY(CAST(:ids AS integer[]))"
)

# Version columns always take the value given (the held one when that part did not move); content
# columns only where the flag says the winner's content differs from the held content. :rows is a JSON
# array of objects with the columns of the record definition.
UPDATE_JOBS: TextClause = text(
    "UPDATE lineage_jobs AS j SET "
    "lineage_version = u.lineage_version, "
    "lineage_event_time = CASE WHEN u.set_lineage THEN u.lineage_event_time ELSE j.lineage_event_time END, "
    "documentation_version = u.documentation_version, "
    "description = CASE WHEN u.set_documentation THEN u.description ELSE j.description END, "
    "sql_version = u.sql_version, "
    "sql = CASE WHEN u.set_sql THEN u.sql ELSE j.sql END, "
    "sql_dialect = CASE WHEN u.set_sql THEN u.sql_dialect ELSE j.sql_dialect END, "
    "job_type_version = u.job_type_version, "
    "processing_type = CASE WHEN u.set_job_type THEN u.processing_type ELSE j.processing_type END, "
    "integration = CASE WHEN u.set_job_type THEN u.integration ELSE j.integration END, "
    "job_type = CASE WHEN u.set_job_type THEN u.job_type ELSE j.job_type END, "
    "updated_at = CASE WHEN u.touched THEN :now ELSE j.updated_at END "
    "FROM (SELECT * FROM json_to_recordset(CAST(:rows AS json)) AS u(id integer, lineage_version text, "
    "set_lineage boolean, lineage_event_time timestamptz, documentation_version text, "
    "set_documentation boolean, description text, sql_version text, set_sql boolean, sql text, "
    "sql_dialect text, job_type_version text, set_job_type boolean, processing_type text, "
    "integration text, job_type text, touched boolean) LIMIT :row_count) AS u "
    "WHERE j.id = u.id"
)
UPDATE_DATASETS: TextClause = text(
    "UPDATE lineage_datasets AS d SET "
    "schema_version = u.schema_version, "
    "documentation_version = u.documentation_version, "
    "description = CASE WHEN u.set_documentation THEN u.description ELSE d.description END, "
    "updated_at = CASE WHEN u.touched THEN :now ELSE d.updated_at END "
    "FROM (SELECT * FROM json_to_recordset(CAST(:rows AS json)) AS u(id integer, schema_version text, "
    "documentation_version text, set_documentation boolean, description text, touched boolean) "
    "LIMIT :row_count) AS u "
    "WHERE d.id = u.id"
)


@lru_cache(maxsize=8)
def insert_json_rows(table_name: str, columns: tuple[str, ...]) -> TextClause:
    """INSERT the rows of :rows (a JSON array of objects with ``columns``) into a lineage child table."""
    table = {t.name: t for t in (statements.FIELDS, statements.JOB_DATASETS, statements.COLUMN_LINEAGE)}[
        table_name
    ]
    record = ", ".join(f"{name} {_pg_type(table.c[name])}" for name in columns)
    names = ", ".join(columns)
    return text(
        f"INSERT INTO {table_name} ({names}) SELECT {names} "  # noqa: S608 - names from the table definition
        f"FROM json_to_recordset(CAST(:rows AS json)) AS x({record})"
    )


def _pg_type(column: Any) -> str:
    # The column types of the lineage child tables: integers, booleans and character data.
    if isinstance(column.type, Integer):
        return "integer"
    if isinstance(column.type, Boolean):
        return "boolean"
    return "text"
