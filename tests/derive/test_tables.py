"""Matching SQL tables to declared datasets, and naming tables when nothing was declared."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from lineage_core.derive import DatasetSchema, derive
from lineage_core.derive.tables import Catalog, table_name

ORDERS = DatasetSchema("sf", "analytics.raw.orders", ("id", "amount"))
OTHER_ORDERS = DatasetSchema("sf", "archive.old.orders", ("id", "amount"))
OUT = DatasetSchema("sf", "analytics.marts.out", ("id",))


def _match(sql_table: str, datasets: list[DatasetSchema], dialect: str | None) -> DatasetSchema | None:
    parsed = sqlglot.parse_one(" ".join(("SELECT 1 FROM", sql_table)), read=dialect)
    table = parsed.find(exp.Table)
    assert table is not None
    name = table_name(table)
    assert name is not None
    return Catalog(datasets, dialect).match(name).dataset


def test_trailing_parts_match() -> None:
    for written in ("analytics.raw.orders", "raw.orders", "orders"):
        assert _match(written, [ORDERS], "snowflake") == ORDERS
    assert _match("other.orders", [ORDERS], "snowflake") is None
    assert _match("x.analytics.raw.orders", [ORDERS], "snowflake") is None


def test_ambiguous_short_name_matches_nothing_but_a_longer_one_decides() -> None:
    assert _match("orders", [ORDERS, OTHER_ORDERS], "postgres") is None
    assert _match("raw.orders", [ORDERS, OTHER_ORDERS], "postgres") == ORDERS
    result = derive(
        "INSERT INTO analytics.marts.out SELECT id FROM orders",
        "postgres",
        inputs=[ORDERS, OTHER_ORDERS],
        outputs=[OUT],
        job_namespace="job",
    )
    assert result.edges == ()
    assert any("matches several declared datasets" in p for p in result.problems)


def test_an_exact_length_match_wins_over_a_trailing_one() -> None:
    short = DatasetSchema("pg", "orders", ("id",))
    assert _match("orders", [ORDERS, short], "postgres") == short


def test_unquoted_names_compare_case_insensitively_in_every_dialect() -> None:
    for dialect in ("snowflake", "postgres", "redshift", "bigquery", "spark", "duckdb", "trino", None):
        assert _match("RAW.Orders", [ORDERS], dialect) == ORDERS, dialect


def test_quoted_names_are_exact_where_quoting_is_case_sensitive() -> None:
    for dialect in ("snowflake", "postgres", "redshift"):
        assert _match('"raw"."orders"', [ORDERS], dialect) == ORDERS
        assert _match('"RAW"."ORDERS"', [ORDERS], dialect) is None, dialect
    upper = DatasetSchema("sf", "ANALYTICS.RAW.ORDERS", ())
    assert _match('"RAW"."ORDERS"', [upper], "snowflake") == upper


def test_quoting_does_not_matter_where_the_engine_ignores_case() -> None:
    assert _match("`RAW`.`ORDERS`", [ORDERS], "bigquery") == ORDERS
    assert _match("`RAW`.`ORDERS`", [ORDERS], "spark") == ORDERS
    assert _match('"RAW"."ORDERS"', [ORDERS], "duckdb") == ORDERS
    assert _match('"RAW"."ORDERS"', [ORDERS], "trino") == ORDERS


def test_bigquery_backticked_project_dataset_table_is_one_name() -> None:
    bq = DatasetSchema("bigquery", "acme-prod.raw.orders", ("id",))
    assert _match("`acme-prod.raw.orders`", [bq], "bigquery") == bq
    assert _match("`acme-prod`.raw.orders", [bq], "bigquery") == bq


def test_a_quoted_path_matches_a_whole_dataset_name() -> None:
    s3 = DatasetSchema("s3://bucket", "raw/orders/part-0.parquet", ("id",))
    assert _match('"raw/orders/part-0.parquet"', [s3], "duckdb") == s3


def test_unmatched_tables_are_reported_and_yield_no_edges() -> None:
    result = derive(
        "INSERT INTO analytics.marts.out SELECT o.id FROM raw.orders o JOIN ref.fx f ON f.d = o.id",
        "snowflake",
        inputs=[ORDERS],
        outputs=[OUT],
        job_namespace="job",
    )
    assert result.unmatched_tables == ("ref.fx",)
    assert {e.input_name for e in result.edges} == {"analytics.raw.orders"}
    assert result.inputs == (("sf", "analytics.raw.orders"),)
    assert result.status == "derived"


def test_no_declared_datasets_derive_table_lineage_in_the_job_namespace() -> None:
    sql = (
        "INSERT INTO marts.Customer_Totals "
        "SELECT customer_id, SUM(amount) AS total FROM raw.orders GROUP BY 1"
    )
    snowflake = derive(sql, "snowflake", inputs=[], outputs=[], job_namespace="airflow-prod")
    assert snowflake.inputs == (("airflow-prod", "RAW.ORDERS"),)
    assert snowflake.outputs == (("airflow-prod", "MARTS.CUSTOMER_TOTALS"),)
    assert {(e.output_field, e.input_field, e.subtype) for e in snowflake.edges} == {
        ("CUSTOMER_ID", "CUSTOMER_ID", "IDENTITY"),
        ("TOTAL", "AMOUNT", "AGGREGATION"),
        (None, "CUSTOMER_ID", "GROUP_BY"),
    }
    postgres = derive(sql, "postgres", inputs=[], outputs=[], job_namespace="pg-job")
    assert postgres.outputs == (("pg-job", "marts.customer_totals"),)
    assert postgres.inputs == (("pg-job", "raw.orders"),)
    quoted = derive(
        'INSERT INTO "Marts"."T" SELECT a FROM "Raw".src',
        "postgres",
        inputs=[],
        outputs=[],
        job_namespace="j",
    )
    assert quoted.outputs == (("j", "Marts.T"),)
    assert quoted.inputs == (("j", "Raw.src"),)
    bigquery = derive(
        "INSERT INTO `proj.DS.Tbl` SELECT a FROM `proj.raw.Src`",
        "bigquery",
        inputs=[],
        outputs=[],
        job_namespace="bq",
    )
    assert bigquery.outputs == (("bq", "proj.DS.Tbl"),)
    assert bigquery.inputs == (("bq", "proj.raw.Src"),)


def test_statements_writing_undeclared_tables_do_not_count_when_outputs_were_declared() -> None:
    result = derive(
        "INSERT INTO scratch.copy SELECT id FROM raw.orders; "
        "INSERT INTO analytics.marts.out SELECT id FROM raw.orders",
        "snowflake",
        inputs=[ORDERS],
        outputs=[OUT],
        job_namespace="job",
    )
    assert result.outputs == (("sf", "analytics.marts.out"),)
    assert {e.output_name for e in result.edges} == {"analytics.marts.out"}
