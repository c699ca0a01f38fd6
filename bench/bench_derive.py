"""Column-lineage derivation: our engine (lineage_core.derive) against openlineage-sql and sqllineage.

Prints one table per workload, (a) the hand-written corpus of tests/derive/corpus and (b) the
synthetic generator's SQL (each event's job.facets.sql and its declared inputs/outputs; the
generator's own columnLineage facet is the expected answer), with for each engine: queries, queries/s,
ms per query, peak memory (tracemalloc, over the same queries), direct-edge recall and precision,
subtype accuracy, indirect-edge recall, the share of derived edges explained, and speed relative to
openlineage-sql in the same run. Then the time our engine takes to derive 10,000 synthetic jobs (the
target: a 10k-job organization in under 120 s on 2 vCPUs).

Edges compare as (output field, input dataset, input field), names case-folded; the baselines' tables
are matched to the declared datasets with the engine's own matching rule, so only lineage is judged.
openlineage-sql and sqllineage give no subtypes, no indirect edges and no explanations: "n/a".
A library that is not installed gets a "not installed" row.

Not a test: run it by hand on an otherwise idle machine (numbers move with load).

    .venv/bin/python -m bench.bench_derive            # full run (corpus, 2,000 synthetic jobs, 10k timing)
    .venv/bin/python -m bench.bench_derive --quick    # a short run (200 jobs, 1,000-job timing, extrapolated)

(c) derives a whole organization through PostgreSQL, as the worker's job does (needs the local
PostgreSQL, as the tests do).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlglot
from sqlglot import exp

from lineage_core.derive import DatasetSchema, derive
from lineage_core.derive.dialects import resolve_dialect
from lineage_core.derive.tables import Catalog, table_name
from tests.derive.corpus import load_corpus

# (output field or None, input name, input field, type, subtype); names case-folded
Edge = tuple[str | None, str, str, str, str]


@dataclass
class Job:
    query: str
    dialect: str | None
    inputs: tuple[DatasetSchema, ...]
    outputs: tuple[DatasetSchema, ...]
    namespace: str
    expected: frozenset[Edge]


@dataclass
class Score:
    queries: int = 0
    seconds: float = 0.0
    peak_bytes: int = 0
    failures: int = 0
    direct_expected: int = 0
    direct_found: int = 0
    direct_got: int = 0
    direct_correct: int = 0
    subtype_checked: int = 0
    subtype_correct: int = 0
    indirect_expected: int = 0
    indirect_found: int = 0
    edges: int = 0
    explained: int = 0
    has_subtypes: bool = True
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ----- workloads -----


def corpus_jobs() -> list[Job]:
    jobs = []
    for case in load_corpus():
        expected = frozenset((_fold(o), name, f.casefold(), t, s) for o, _ns, name, f, t, s, _m in case.edges)
        jobs.append(Job(case.query, case.dialect, case.inputs, case.outputs, "corpus", expected))
    return jobs


def _synthetic_module() -> Any:
    # The generator is moving from lineage_core.lineage to lineage_core.demo.
    for name in ("lineage_core.demo.synthetic", "lineage_core.lineage.synthetic"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise SystemExit("the synthetic generator (lineage_core.demo.synthetic) is not importable")


def _schema(dataset: dict[str, Any]) -> DatasetSchema:
    fields = (dataset.get("facets") or {}).get("schema", {}).get("fields") or []
    return DatasetSchema(dataset["namespace"], dataset["name"], tuple(f["name"] for f in fields))


def synthetic_jobs(count: int, seed: int) -> list[Job]:
    module = _synthetic_module()
    jobs = []
    for event in module.iter_synthetic_events(jobs=count, seed=seed):
        sql = event["job"]["facets"]["sql"]
        expected: set[Edge] = set()
        for output in event["outputs"]:
            lineage = output["facets"].get("columnLineage") or {}
            for out_field, spec in (lineage.get("fields") or {}).items():
                for source in spec["inputFields"]:
                    for t in source.get("transformations") or []:
                        expected.add(
                            (
                                out_field.casefold(),
                                source["name"],
                                source["field"].casefold(),
                                t["type"],
                                t["subtype"],
                            )
                        )
            for source in lineage.get("dataset") or []:
                for t in source.get("transformations") or []:
                    expected.add((None, source["name"], source["field"].casefold(), t["type"], t["subtype"]))
        jobs.append(
            Job(
                sql["query"],
                sql.get("dialect"),
                tuple(_schema(d) for d in event["inputs"]),
                tuple(_schema(d) for d in event["outputs"]),
                event["job"]["namespace"],
                frozenset(expected),
            )
        )
    return jobs


def _fold(value: str | None) -> str | None:
    return None if value is None else value.casefold()


# ----- engines -----


def ours(job: Job) -> tuple[set[Edge], int, int]:
    result = derive(
        job.query, job.dialect, inputs=job.inputs, outputs=job.outputs, job_namespace=job.namespace
    )
    edges = {
        (_fold(e.output_field), e.input_name, e.input_field.casefold(), e.type, e.subtype)
        for e in result.edges
    }
    explained = sum(1 for e in result.edges if e.description.strip())
    return edges, len(result.edges), explained


def _dataset_of(qualified: str, job: Job) -> str | None:
    # Match a baseline's table name to the declared inputs with the engine's rule.
    table: exp.Table | None
    try:
        table = exp.to_table(qualified, dialect=resolve_dialect(job.dialect))
    except sqlglot.errors.SqlglotError:
        table = None
    name = table_name(table) if table is not None else None
    if name is None:
        return None
    match = Catalog(job.inputs, resolve_dialect(job.dialect)).match(name)
    return match.dataset.name if match.dataset is not None else None


def openlineage_sql_engine() -> Callable[[Job], tuple[set[Edge], int, int]] | None:
    try:
        import openlineage_sql
    except ImportError:
        return None

    def run(job: Job) -> tuple[set[Edge], int, int]:
        dialect = (resolve_dialect(job.dialect) or "generic").replace("postgres", "postgresql")
        meta = openlineage_sql.parse([job.query], dialect=dialect)
        edges: set[Edge] = set()
        if meta is None:
            return edges, 0, 0
        for lineage in meta.column_lineage:
            for source in lineage.lineage:
                origin = source.origin
                if origin is None:
                    continue
                dataset = _dataset_of(origin.qualified_name, job)
                if dataset is not None:
                    edges.add(
                        (lineage.descendant.name.casefold(), dataset, source.name.casefold(), "DIRECT", "")
                    )
        return edges, len(edges), 0

    return run


_SQLFLUFF_DIALECTS = {
    None: "ansi",
    "postgres": "postgres",
    "spark": "sparksql",
    "databricks": "databricks",
    "presto": "trino",
}


def sqllineage_engine() -> Callable[[Job], tuple[set[Edge], int, int]] | None:
    try:
        from sqllineage.runner import LineageRunner
    except ImportError:
        return None

    def run(job: Job) -> tuple[set[Edge], int, int]:
        resolved = resolve_dialect(job.dialect)
        dialect = _SQLFLUFF_DIALECTS.get(resolved, resolved or "ansi")
        runner = LineageRunner(job.query, dialect=dialect, silent_mode=True)
        edges: set[Edge] = set()
        for path in runner.get_column_lineage(exclude_subquery_columns=True):
            source, target = path[0], path[-1]
            parent = source.parent
            if parent is None:
                continue
            dataset = _dataset_of(str(parent).replace("<default>.", ""), job)
            if dataset is not None:
                edges.add(
                    (str(target.raw_name).casefold(), dataset, str(source.raw_name).casefold(), "DIRECT", "")
                )
        return edges, len(edges), 0

    return run


# ----- measuring -----


def _score(jobs: Sequence[Job], engine: Callable[[Job], tuple[set[Edge], int, int]], subtypes: bool) -> Score:
    score = Score(has_subtypes=subtypes)
    results: list[set[Edge] | None] = []
    gc.collect()
    started = time.perf_counter()
    for job in jobs:
        try:
            edges, count, explained = engine(job)
        except Exception:  # a baseline that raises on a query scores nothing for it
            score.failures += 1
            results.append(None)
            continue
        results.append(edges)
        score.edges += count
        score.explained += explained
    score.seconds = time.perf_counter() - started
    score.queries = len(jobs)
    # Memory on a second pass: tracemalloc slows the code it watches, so it is not in the timing.
    tracemalloc.start()
    for job in jobs[:200]:
        with contextlib.suppress(Exception):
            engine(job)
    score.peak_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    for job, got in zip(jobs, results, strict=True):
        expected_direct = {e for e in job.expected if e[3] == "DIRECT"}
        expected_pairs = {e[:3] for e in expected_direct}
        got_direct = {e for e in got or () if e[3] == "DIRECT"}
        got_pairs = {e[:3] for e in got_direct}
        score.direct_expected += len(expected_pairs)
        score.direct_found += len(expected_pairs & got_pairs)
        score.direct_got += len(got_pairs)
        score.direct_correct += len(got_pairs & expected_pairs)
        for edge in expected_direct:
            if edge[:3] in got_pairs:
                score.subtype_checked += 1
                score.subtype_correct += edge in got_direct
        expected_indirect = {e for e in job.expected if e[3] == "INDIRECT"}
        score.indirect_expected += len(expected_indirect)
        score.indirect_found += len(expected_indirect & (got or set()))
    return score


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def _row(name: str, score: Score | None, baseline: Score | None) -> list[str]:
    if score is None:
        return [name, "not installed", *[""] * 10]
    qps = score.queries / score.seconds if score.seconds else 0.0
    ratio = "1.00x"
    if baseline is not None and baseline is not score and baseline.seconds:
        ratio = f"{qps / (baseline.queries / baseline.seconds):.2f}x"
    elif baseline is None:
        ratio = "n/a"
    subtype = _pct(score.subtype_correct, score.subtype_checked) if score.has_subtypes else "n/a"
    indirect = _pct(score.indirect_found, score.indirect_expected) if score.has_subtypes else "n/a"
    explained = _pct(score.explained, score.edges) if score.has_subtypes else "n/a"
    return [
        name,
        str(score.queries),
        f"{qps:.0f}",
        f"{1000 * score.seconds / max(score.queries, 1):.2f}",
        f"{score.peak_bytes / 2**20:.1f} MiB",
        _pct(score.direct_found, score.direct_expected),
        _pct(score.direct_correct, score.direct_got),
        subtype,
        indirect,
        explained,
        ratio,
        str(score.failures),
    ]


HEADER = [
    "engine",
    "queries",
    "q/s",
    "ms/query",
    "peak mem",
    "direct recall",
    "direct precision",
    "subtype acc",
    "indirect recall",
    "explained",
    "speed vs ol-sql",
    "raised",
]


def _table(title: str, rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    print(f"\n{title}")
    for row in [HEADER, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def _workload(title: str, jobs: list[Job], sqllineage_limit: int | None) -> None:
    engines: list[tuple[str, Callable[[Job], tuple[set[Edge], int, int]] | None, bool]] = [
        ("lineage_core.derive", ours, True),
        ("openlineage-sql", openlineage_sql_engine(), False),
        ("sqllineage", sqllineage_engine(), False),
    ]
    scores: dict[str, Score | None] = {}
    for name, engine, subtypes in engines:
        if engine is None:
            scores[name] = None
            continue
        subset = jobs if name != "sqllineage" or sqllineage_limit is None else jobs[:sqllineage_limit]
        scores[name] = _score(subset, engine, subtypes)
    baseline = scores.get("openlineage-sql")
    rows = [_row(name, scores[name], baseline) for name, _e, _s in engines]
    parseable = [job for job in jobs if _parses(job)]
    if len(parseable) < len(jobs):
        # Some generated SQL is not SQL (S3 object paths as bare table names): score those apart.
        rows.insert(1, _row("  same, parseable SQL only", _score(parseable, ours, True), None))
    _table(title, rows)
    if len(parseable) < len(jobs):
        print(f"  {len(jobs) - len(parseable)} of {len(jobs)} queries are not valid SQL in their dialect")
    if sqllineage_limit is not None and scores.get("sqllineage") is not None:
        print(f"  (sqllineage on the first {sqllineage_limit} queries only: it parses with sqlfluff, slowly)")


def _parses(job: Job) -> bool:
    try:
        sqlglot.parse(job.query, read=resolve_dialect(job.dialect))
    except sqlglot.errors.SqlglotError:
        return False
    return True


def _ten_thousand(jobs_count: int, seed: int) -> None:
    print(f"\nDeriving {jobs_count:,} synthetic jobs with lineage_core.derive (generation not timed)")
    jobs = synthetic_jobs(jobs_count, seed)
    gc.collect()
    started = time.perf_counter()
    statuses: dict[str, int] = {}
    for job in jobs:
        result = derive(
            job.query, job.dialect, inputs=job.inputs, outputs=job.outputs, job_namespace=job.namespace
        )
        statuses[result.status] = statuses.get(result.status, 0) + 1
    elapsed = time.perf_counter() - started
    per_10k = elapsed * 10_000 / jobs_count
    print(
        f"  {elapsed:.1f} s for {jobs_count:,} jobs ({jobs_count / elapsed:.0f} jobs/s); "
        f"10k jobs: {per_10k:.1f} s (target < 120 s); statuses: {dict(sorted(statuses.items()))}"
    )


def _through_the_store(jobs_count: int, seed: int) -> None:
    """(c) What the worker's job does: derive a whole organization stored in PostgreSQL, then again.

    Two organizations of the same synthetic jobs in a throwaway database: one as the generator sends
    them (its producers report column lineage: the baseline), one without the columnLineage facet (a
    producer that sends only SQL and table lineage). The second is derived (first pass: every job;
    second pass: every source fingerprint unchanged), then the export's read of both is timed: derived
    lineage merged in against the same amount of reported lineage. ANALYZE runs before the reads, as
    autovacuum would in production.
    """
    import io

    import orjson
    from sqlalchemy import text

    from lineage_core.export.events import EventWriter
    from lineage_core.export.snapshot import write_snapshot_lines
    from lineage_core.infra import migrate
    from lineage_core.infra.db import session_factory
    from lineage_core.infra.models import Organization, utcnow
    from lineage_core.lineage.derivations import derive_organization
    from lineage_core.lineage.importer import import_events
    from tests.services import throwaway_postgres_database

    module = _synthetic_module()
    reported, stripped = io.BytesIO(), io.BytesIO()
    for event in module.iter_synthetic_events(jobs_count, seed):
        reported.write(orjson.dumps(event) + b"\n")
        for output in event["outputs"]:
            output["facets"].pop("columnLineage", None)
        stripped.write(orjson.dumps(event) + b"\n")
    print(f"\n(c) through the store: {jobs_count:,} jobs (PostgreSQL)")
    rows = [["step", "jobs", "time", "jobs/s", "edges", "ratio"]]
    with throwaway_postgres_database() as url:
        migrate.upgrade(url)
        with session_factory(url)() as session:
            orgs = {}
            for slug, body in (("reported", reported), ("derived", stripped)):
                org = Organization(slug=slug, name=slug)
                session.add(org)
                session.commit()
                body.seek(0)
                import_events(session, org.id, body)
                orgs[slug] = org.id

            def export_read(organization_id: int) -> float:
                session.execute(text("ANALYZE"))
                session.commit()
                started = time.perf_counter()
                for _line in write_snapshot_lines(session, organization_id, EventWriter(utcnow())):
                    pass
                session.rollback()
                return time.perf_counter() - started

            for label in ("derive, first pass", "derive, nothing changed"):
                started = time.perf_counter()
                report = derive_organization(session, orgs["derived"])
                elapsed = time.perf_counter() - started
                rows.append(
                    [
                        label,
                        f"{report.jobs_with_sql:,}",
                        f"{elapsed:.1f} s",
                        f"{report.jobs_with_sql / elapsed:,.0f}",
                        f"{report.edges:,}",
                        f"10k jobs: {elapsed * 10_000 / jobs_count:.0f} s (target < 120 s)"
                        if label.endswith("first pass")
                        else "",
                    ]
                )
            baseline = export_read(orgs["reported"])
            derived = export_read(orgs["derived"])
            rows.append(
                [
                    "export read, lineage reported (baseline)",
                    f"{jobs_count:,}",
                    f"{baseline:.2f} s",
                    f"{jobs_count / baseline:,.0f}",
                    "",
                    "1.00x",
                ]
            )
            rows.append(
                [
                    "export read, lineage derived",
                    f"{jobs_count:,}",
                    f"{derived:.2f} s",
                    f"{jobs_count / derived:,.0f}",
                    "",
                    f"{derived / baseline:.2f}x",
                ]
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in [rows[0], ["-" * w for w in widths], *rows[1:]]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--jobs", type=int, default=None, help="synthetic jobs for the comparison table")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--store-jobs", type=int, default=None, help="jobs for (c), through PostgreSQL")
    args = parser.parse_args(argv)
    # sqllineage warns on every statement it skips (BEGIN, COMMIT...); the table says what it found.
    warnings.filterwarnings("ignore", module="sqllineage")
    synthetic_count = args.jobs or (200 if args.quick else 2000)
    print(f"Python {sys.version.split()[0]}, sqlglot {sqlglot.__version__}, {_versions()}")
    _workload("(a) hand-written corpus (tests/derive/corpus)", corpus_jobs(), None)
    _workload(
        f"(b) synthetic generator SQL, {synthetic_count:,} jobs (expected: the generator's columnLineage)",
        synthetic_jobs(synthetic_count, args.seed),
        100 if args.quick else 300,
    )
    _ten_thousand(1000 if args.quick else 10_000, args.seed)
    _through_the_store(args.store_jobs or (500 if args.quick else 10_000), args.seed)


def _versions() -> str:
    found = []
    for package in ("openlineage-sql", "sqllineage"):
        try:
            from importlib.metadata import version

            found.append(f"{package} {version(package)}")
        except Exception:
            found.append(f"{package} not installed")
    return ", ".join(found)


if __name__ == "__main__":
    main()
