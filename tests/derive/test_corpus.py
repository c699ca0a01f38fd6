"""Every hand-written corpus case: exact edges (direct, subtypes, indirect, masking) and explanations."""

from __future__ import annotations

import pytest

from lineage_core.derive import derive
from tests.derive.corpus import Case, load_corpus

CASES = load_corpus()


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 45
    dialects = {(case.dialect or "").lower() for case in CASES}
    for wanted in ("snowflake", "bigquery", "postgres", "redshift", "spark", "duckdb", "trino"):
        assert any(wanted in d for d in dialects), wanted


def _run(case: Case):  # type: ignore[no-untyped-def]
    return derive(
        case.query, case.dialect, inputs=case.inputs, outputs=case.outputs, job_namespace="corpus-job"
    )


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_edges_match_the_hand_written_expectation(case: Case) -> None:
    result = _run(case)
    got = {
        (e.output_field, e.input_namespace, e.input_name, e.input_field, e.type, e.subtype, e.masking)
        for e in result.edges
    }
    missing = sorted(case.edges - got, key=str)
    extra = sorted(got - case.edges, key=str)
    assert not missing and not extra, f"missing={missing}\nextra={extra}\nproblems={result.problems}"
    assert result.unmatched_tables == case.unmatched
    assert result.status == case.status, result.problems
    assert len(result.edges) == len(got), "an edge was emitted twice"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_explanation_names_its_columns(case: Case) -> None:
    for edge in _run(case).edges:
        text = edge.description.casefold()
        assert text.strip(), edge
        assert edge.input_field.casefold() in text, edge
        names_output = edge.subtype in ("TRANSFORMATION", "WINDOW", "CONDITIONAL") and not edge.masking
        if edge.output_field is not None and names_output:
            assert edge.output_field.casefold() in text, edge
        if edge.type == "DIRECT" and edge.subtype != "IDENTITY":
            wanted = case.functions.get(edge.output_field or "")
            if wanted:
                assert wanted.casefold() in text, (wanted, edge.description)
        if edge.masking:
            assert "(masked)" in text, edge
