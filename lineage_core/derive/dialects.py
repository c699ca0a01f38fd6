"""Map the OpenLineage ``sql`` facet's dialect string onto a sqlglot dialect name.

Producers spell dialects freely (``"PostgreSQL"``, ``"sparksql"``, ``"databricks"``...). The map is
case-insensitive and ignores surrounding spaces, dashes and underscores. An unknown or missing
dialect resolves to ``None``: sqlglot's generic dialect, which parses most ANSI-ish SQL. The caller
mentions the fallback in ``problems`` only when parsing then fails, since a generic parse that works
is a correct parse.
"""

from __future__ import annotations

# Keys are already normalised by _key(); values are sqlglot dialect names.
_ALIASES: dict[str, str] = {
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "googlebigquery": "bigquery",
    "bq": "bigquery",
    "postgres": "postgres",
    "postgresql": "postgres",
    "pg": "postgres",
    "redshift": "redshift",
    "spark": "spark",
    "sparksql": "spark",
    "spark2": "spark2",
    "databricks": "databricks",
    "hive": "hive",
    "hiveql": "hive",
    "duckdb": "duckdb",
    "trino": "trino",
    "presto": "presto",
    "athena": "athena",
    "mysql": "mysql",
    "mariadb": "mysql",
    "oracle": "oracle",
    "tsql": "tsql",
    "mssql": "tsql",
    "sqlserver": "tsql",
    "sqlite": "sqlite",
    "clickhouse": "clickhouse",
    "teradata": "teradata",
    "dremio": "dremio",
    "doris": "doris",
    "starrocks": "starrocks",
    "exasol": "exasol",
    "risingwave": "risingwave",
    "materialize": "materialize",
}


def _key(dialect: str) -> str:
    return "".join(ch for ch in dialect.strip().lower() if ch not in " -_")


def resolve_dialect(dialect: str | None) -> str | None:
    """The sqlglot dialect for an OpenLineage dialect string, or ``None`` for the generic dialect."""
    if not dialect:
        return None
    return _ALIASES.get(_key(dialect))


# Dialects whose quoted identifiers are case-sensitive while unquoted ones fold; everywhere else
# (BigQuery backticks, Spark/Hive, DuckDB, Trino/Presto) quoting does not change how names compare.
QUOTE_SENSITIVE: frozenset[str | None] = frozenset({None, "snowflake", "postgres", "redshift", "oracle"})

# How an unquoted identifier is stored, for naming undeclared datasets: Snowflake and Oracle fold to
# upper case, BigQuery keeps table names as written (they are case-sensitive there), the rest fold
# to lower case.
_UPPER: frozenset[str | None] = frozenset({"snowflake", "oracle"})
_AS_WRITTEN: frozenset[str | None] = frozenset({"bigquery"})


def fold(name: str, quoted: bool, dialect: str | None) -> str:
    """The stored spelling of one identifier part under the dialect's case rules."""
    if quoted or dialect in _AS_WRITTEN:
        return name
    return name.upper() if dialect in _UPPER else name.lower()
