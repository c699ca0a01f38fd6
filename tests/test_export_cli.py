"""``flask --app portal export write``: the snapshot into a local file or standard output."""

from __future__ import annotations

from pathlib import Path

import orjson
from flask import Flask
from sqlalchemy.orm import Session

from lineage_core.infra.models import Organization
from tests.factories import feature_events, store_events
from tests.readback import load_with_openlineage_classes


def test_writes_one_event_per_job_to_a_file(
    app: Flask, db: Session, org: Organization, tmp_path: Path
) -> None:
    store_events(db, org.id, feature_events(jobs=4))
    out = tmp_path / "openlineage-events.jsonl"
    out.write_bytes(b"previous\n")

    result = app.test_cli_runner().invoke(args=["export", "write", "--org", "acme", "--out", str(out)])

    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert len(lines) == 8
    events = [orjson.loads(line) for line in lines]
    assert {e["eventTime"] for e in events} == {events[0]["eventTime"]}  # one snapshot, one time
    for event in events:
        load_with_openlineage_classes(event)
    assert f"Wrote 8 events ({out.stat().st_size} bytes) of organization acme to {out}." in result.stderr
    assert list(tmp_path.iterdir()) == [out]  # the temporary file was renamed over it


def test_dash_writes_only_ndjson_to_stdout(app: Flask, db: Session, org: Organization) -> None:
    store_events(db, org.id, feature_events(jobs=2))

    result = app.test_cli_runner().invoke(args=["export", "write", "--org", "acme", "--out", "-"])

    assert result.exit_code == 0, result.output
    assert [orjson.loads(line)["job"]["name"] for line in result.stdout_bytes.splitlines()] == [
        e["job"]["name"] for e in feature_events(jobs=2)
    ]
    assert "Wrote 6 events" in result.stderr


def test_an_org_without_lineage_writes_an_empty_file(app: Flask, org: Organization, tmp_path: Path) -> None:
    out = tmp_path / "empty.jsonl"

    result = app.test_cli_runner().invoke(args=["export", "write", "--org", "acme", "--out", str(out)])

    assert result.exit_code == 0, result.output
    assert out.read_bytes() == b""


def test_unknown_org_and_missing_folder_are_errors(app: Flask, org: Organization, tmp_path: Path) -> None:
    runner = app.test_cli_runner()

    unknown = runner.invoke(args=["export", "write", "--org", "nope", "--out", str(tmp_path / "x.jsonl")])
    no_folder = runner.invoke(
        args=["export", "write", "--org", "acme", "--out", str(tmp_path / "a" / "x.jsonl")]
    )

    assert unknown.exit_code == 1 and "No organization 'nope'." in unknown.output
    assert no_folder.exit_code == 1 and "does not exist" in no_folder.output
