"""derive() never raises, says what failed, and always gives the same answer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage_core.derive import DatasetSchema, Derivation, derive
from tests.derive.corpus import load_corpus

SRC = DatasetSchema("ns", "db.src", ("a", "b", "c"))
DST = DatasetSchema("ns", "db.dst", ("x", "y"))


def _derive(sql: str, dialect: str | None = "postgres") -> Derivation:
    return derive(sql, dialect, inputs=[SRC], outputs=[DST], job_namespace="job")


@pytest.mark.parametrize(
    "sql",
    ["SELEC x FRM", "INSERT INTO db.dst SELECT (a FROM db.src", "'unterminated", "", "   ", ";;;"],
)
def test_unparseable_sql_fails_without_raising(sql: str) -> None:
    result = _derive(sql)
    assert result.status == "failed"
    assert result.problems
    assert result.edges == ()


def test_parse_errors_give_line_and_column() -> None:
    result = _derive("INSERT INTO db.dst\nSELECT a, FROM WHERE")
    assert any("line 2" in p and "column" in p for p in result.problems), result.problems


def test_one_bad_statement_of_two_is_partial() -> None:
    result = _derive("INSERT INTO db.dst (x, y) SELECT a, b FROM db.src; SELECT FROM WHERE;")
    assert result.status == "partial"
    assert any(p.startswith("Statement 2 could not be parsed") for p in result.problems)
    assert {(e.output_field, e.input_field) for e in result.edges} == {("x", "a"), ("y", "b")}


def test_unsupported_statements_are_reported() -> None:
    result = _derive("DELETE FROM db.dst WHERE x = 1")
    assert result.status == "failed"
    assert any("DELETE" in p and "not supported" in p for p in result.problems)


def test_a_star_without_schema_is_reported() -> None:
    result = derive(
        "INSERT INTO db.dst SELECT * FROM db.unknown_schema",
        "postgres",
        inputs=[DatasetSchema("ns", "db.unknown_schema", ())],
        outputs=[DST],
        job_namespace="job",
    )
    assert result.status == "partial"
    assert any("`*` could not be expanded" in p for p in result.problems)


def test_inert_statements_are_understood() -> None:
    result = _derive("USE db; SET x = 1; BEGIN; INSERT INTO db.dst (x) VALUES (1); COMMIT;")
    assert result.status == "derived"
    assert result.problems == ()


def test_deeply_nested_sql_does_not_raise() -> None:
    sql = "INSERT INTO db.dst SELECT " + "(" * 3000 + "a" + ")" * 3000 + " FROM db.src"
    result = _derive(sql)
    assert isinstance(result, Derivation)


def test_same_input_same_output_including_order_and_text() -> None:
    for case in load_corpus():
        first = derive(case.query, case.dialect, inputs=case.inputs, outputs=case.outputs, job_namespace="j")
        second = derive(case.query, case.dialect, inputs=case.inputs, outputs=case.outputs, job_namespace="j")
        assert first == second
        assert [e.description for e in first.edges] == [e.description for e in second.edges]


def test_dataset_level_edges_come_after_field_level_ones() -> None:
    for case in load_corpus():
        result = derive(case.query, case.dialect, inputs=case.inputs, outputs=case.outputs, job_namespace="j")
        for output in {(e.output_namespace, e.output_name) for e in result.edges}:
            kinds = [
                e.output_field is None for e in result.edges if (e.output_namespace, e.output_name) == output
            ]
            assert kinds == sorted(kinds)


_SQL_WORDS = st.sampled_from(
    [
        "SELECT",
        "FROM",
        "WHERE",
        "INSERT",
        "INTO",
        "MERGE",
        "USING",
        "WITH",
        "AS",
        "(",
        ")",
        ",",
        ";",
        "*",
        "db.src",
        "db.dst",
        "a",
        "b",
        "=",
        "1",
        "'x'",
        "JOIN",
        "ON",
        "GROUP",
        "BY",
        "UNION",
        "CASE",
        "WHEN",
        "THEN",
        "END",
        "OVER",
        "PARTITION",
        "SUM(a)",
        '"q"',
        "`b`",
        "--",
        "/*",
        "\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=200),
    st.sampled_from([None, "snowflake", "bigquery", "postgres", "spark", "duckdb", "trino", "x"]),
)
def test_derive_never_raises_on_arbitrary_text(text: str, dialect: str | None) -> None:
    result = derive(text, dialect, inputs=[SRC], outputs=[DST], job_namespace="job")
    assert result.status in ("derived", "partial", "failed")


@settings(max_examples=300, deadline=None)
@given(st.lists(_SQL_WORDS, max_size=40), st.sampled_from([None, "snowflake", "postgres", "bigquery"]))
def test_derive_never_raises_on_sql_like_token_soup(words: list[str], dialect: str | None) -> None:
    result = derive(" ".join(words), dialect, inputs=[SRC], outputs=[DST], job_namespace="job")
    assert result.status in ("derived", "partial", "failed")
    for edge in result.edges:
        assert edge.description
