"""OpenLineage dialect strings map onto sqlglot's, case-insensitively, with a generic fallback."""

from __future__ import annotations

import pytest

from lineage_core.derive import DatasetSchema, derive
from lineage_core.derive.dialects import resolve_dialect


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("snowflake", "snowflake"),
        ("Snowflake", "snowflake"),
        ("BIGQUERY", "bigquery"),
        ("postgres", "postgres"),
        ("PostgreSQL", "postgres"),
        ("redshift", "redshift"),
        ("spark", "spark"),
        ("SparkSQL", "spark"),
        ("spark-sql", "spark"),
        ("databricks", "databricks"),
        ("hive", "hive"),
        ("duckdb", "duckdb"),
        ("trino", "trino"),
        ("Presto", "presto"),
        (" mssql ", "tsql"),
    ],
)
def test_known_dialects(given: str, expected: str) -> None:
    assert resolve_dialect(given) == expected


@pytest.mark.parametrize("given", [None, "", "cobol-sql", "made up"])
def test_unknown_or_missing_falls_back_to_generic(given: str | None) -> None:
    assert resolve_dialect(given) is None


def test_fallback_is_silent_when_the_generic_parse_works() -> None:
    src = DatasetSchema("ns", "db.src", ("a",))
    result = derive(
        "INSERT INTO db.dst SELECT a FROM db.src",
        "cobol-sql",
        inputs=[src],
        outputs=[DatasetSchema("ns", "db.dst", ("a",))],
        job_namespace="job",
    )
    assert result.status == "derived"
    assert result.problems == ()


def test_fallback_is_named_when_parsing_then_fails() -> None:
    result = derive("SELECT FROM WHERE (", "cobol-sql", inputs=[], outputs=[], job_namespace="job")
    assert result.status == "failed"
    assert any("`cobol-sql` is unknown" in p for p in result.problems)
    missing = derive("SELECT FROM WHERE (", None, inputs=[], outputs=[], job_namespace="job")
    assert any("no dialect was given" in p for p in missing.problems)


def test_dialect_specific_syntax_needs_the_dialect() -> None:
    # QUALIFY and IFF are Snowflake's; the same statement derives under the mapped dialect.
    sql = (
        "INSERT INTO db.dst SELECT IFF(a > 1, a, 0) AS a FROM db.src "
        "QUALIFY ROW_NUMBER() OVER (ORDER BY a) = 1"
    )
    result = derive(
        sql,
        "SNOWFLAKE",
        inputs=[DatasetSchema("ns", "db.src", ("a",))],
        outputs=[DatasetSchema("ns", "db.dst", ("a",))],
        job_namespace="job",
    )
    assert result.status == "derived", result.problems
    assert {(e.subtype, e.output_field) for e in result.edges} >= {
        ("TRANSFORMATION", "a"),
        ("CONDITIONAL", "a"),
        ("FILTER", None),
    }
