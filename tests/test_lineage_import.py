"""`flask lineage import` and `flask lineage generate`: good and bad lines, reports, idempotence."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from flask import Flask
from sqlalchemy.orm import Session

from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.infra.models import Organization
from lineage_core.lineage.importer import import_events
from tests.factories import orders_event, run_event
from tests.readback import graph_of

# In this process (the CLI runner): no worker processes forked from the test run's (see
# test_parallel_import.py for the default, several processes, run as its own process).
ONE = ("--workers", "1")


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    bad_uuid = orders_event(job="bad.uuid")
    bad_uuid["run"]["runId"] = "123"
    no_offset = run_event(job="bad.time", time="2024-05-01T12:00:00")
    return write_lines(
        tmp_path / "events.jsonl",
        [
            orjson.dumps(orders_event()),  # 1 good
            b'{"eventType": "START", ',  # 2 malformed
            orjson.dumps(bad_uuid),  # 3 bad runId
            b"",  # 4 blank: skipped, not a reject
            orjson.dumps(run_event(job="second", inputs=[{"namespace": "s3://raw", "name": "a.csv"}]))
            + b"\r",  # 5
            orjson.dumps(no_offset),  # 6 no offset
            b'{"padding": "' + b"x" * 5000 + b'"}',  # 7 too long
            orjson.dumps(run_event(job="third", event_type="START")),  # 8 good
        ],
    )


def test_import_stores_good_lines_and_reports_each_bad_one(
    app: Flask, db: Session, org: Organization, mixed_file: Path
) -> None:
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=["lineage", "import", str(mixed_file), "--org", "acme", "--max-event-bytes", "4000", *ONE]
    )
    assert result.exit_code == 1
    report = result.stdout.splitlines()
    assert report[0].startswith("line 2: body: The body is not valid JSON")
    assert report[1] == (
        "line 3: run.runId: run.runId '123' is not a UUID such as '0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e'."
    )
    assert report[2].startswith("line 6: eventTime: eventTime '2024-05-01T12:00:00' has no UTC offset")
    assert (
        report[3] == "line 7: line: The line is longer than 4000 bytes; split the event or raise the limit."
    )
    assert len(report) == 4
    assert "7 events: 3 stored, 4 rejected. Job lineage: 1 not_carried, 2 replaced." in result.stderr
    assert [job["name"] for job in graph_of(db, org.id)] == ["etl.orders_daily", "second", "third"]

    graph = graph_of(db, org.id)
    again = runner.invoke(
        args=["lineage", "import", str(mixed_file), "--org", "acme", "--max-event-bytes", "4000", *ONE]
    )
    assert "3 stored, 4 rejected. Job lineage: 1 not_carried, 2 unchanged." in again.stderr
    assert graph_of(db, org.id) == graph


def test_a_clean_file_exits_zero(app: Flask, db: Session, org: Organization, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "ok.jsonl", [orjson.dumps(e) for e in iter_synthetic_events(12, seed=5)])
    result = app.test_cli_runner().invoke(args=["lineage", "import", str(path), "--org", "acme", *ONE])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert len(graph_of(db, org.id)) == 12


def test_an_unknown_organization_is_refused(app: Flask, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "ok.jsonl", [orjson.dumps(orders_event())])
    result = app.test_cli_runner().invoke(args=["lineage", "import", str(path), "--org", "nobody"])
    assert result.exit_code == 1
    assert "No organization 'nobody'" in result.output


def test_the_importer_reads_line_by_line_and_reports_progress(
    db: Session, org: Organization, tmp_path: Path
) -> None:
    lines = [orjson.dumps(orders_event(time=f"2024-05-01T12:00:0{i}Z")) for i in range(3)]
    path = write_lines(tmp_path / "p.jsonl", [lines[0], b"x" * 100_000, lines[1], lines[2]])
    progress: list[int] = []

    class CountingReader:
        """Fails the test if the importer ever asks for more than a line's worth at once."""

        def __init__(self, raw: object) -> None:
            self.raw = raw

        def readline(self, limit: int = -1) -> bytes:
            assert 0 < limit <= 1024 * 1024
            return self.raw.readline(limit)  # type: ignore[attr-defined, no-any-return]

    with path.open("rb") as raw:
        report = import_events(
            db,
            org.id,
            CountingReader(raw),
            max_event_bytes=10_000,
            on_progress=progress.append,  # type: ignore[arg-type]
        )
    assert (report.lines, report.stored, report.rejected) == (4, 3, 1)
    assert sum(progress) == path.stat().st_size


def test_generate_stores_a_synthetic_org_and_is_repeatable(
    app: Flask, db: Session, org: Organization
) -> None:
    runner = app.test_cli_runner()
    result = runner.invoke(args=["lineage", "generate", "--org", "acme", "--jobs", "8", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert "Generated 8 jobs into acme (seed 2); 8 jobs' lineage written." in result.stdout
    graph = graph_of(db, org.id)
    assert len(graph) == 8
    again = runner.invoke(args=["lineage", "generate", "--org", "acme", "--jobs", "8", "--seed", "2"])
    assert "0 jobs' lineage written" in again.stdout
    assert graph_of(db, org.id) == graph


def test_generate_writes_ndjson_without_an_org(app: Flask, tmp_path: Path) -> None:
    out = tmp_path / "synthetic.jsonl"
    result = app.test_cli_runner().invoke(args=["lineage", "generate", "--jobs", "5", "--output", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert [orjson.loads(line) for line in lines] == list(iter_synthetic_events(5, 0))
    assert app.test_cli_runner().invoke(args=["lineage", "generate", "--jobs", "5"]).exit_code == 2
