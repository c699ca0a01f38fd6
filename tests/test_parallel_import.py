"""`flask lineage import` with several worker processes (its default), run as its own process.

The same file imported by two processes at once and by one gives the same graph, the same counts and
the same rejects, reported in line order, including a line only the database refuses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
from sqlalchemy.orm import Session

from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.infra.config import Settings
from lineage_core.lineage.importer import import_events
from tests.db_refusals import POISON, refusing_jobs_named_poison
from tests.factories import make_org, orders_event, run_event
from tests.readback import graph_of
from tests.services import process_env

ROOT = Path(__file__).resolve().parents[1]


def _import(settings: Settings, path: Path, slug: str, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "flask", "--app", "portal", "lineage", "import", str(path)]
    return subprocess.run(
        [*command, "--org", slug, *options],
        env=process_env(settings),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _file(tmp_path: Path) -> Path:
    """120 synthetic jobs, then the same events again, with bad lines among them."""
    good = [orjson.dumps(e) for e in iter_synthetic_events(120, seed=3)]
    bad_uuid = orders_event(job="bad.uuid")
    bad_uuid["run"]["runId"] = "123"
    lines = [
        *good[:60],
        b'{"eventType": "START", ',
        *good[60:],
        orjson.dumps(bad_uuid),
        orjson.dumps(run_event(job=POISON)),
        *good,  # the same events again: nothing changes
        b"[]",
    ]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_two_worker_processes_import_what_one_process_imports(
    settings: Settings, db: Session, tmp_path: Path
) -> None:
    path = _file(tmp_path)
    serial_org, parallel_org = make_org(db, "serial"), make_org(db, "parallel")
    with refusing_jobs_named_poison(settings.database_url):
        with path.open("rb") as stream:
            serial = import_events(db, serial_org.id, stream, batch_events=25)
        done = _import(settings, path, "parallel", "--workers", "2", "--batch-events", "25")

    assert done.returncode == 1, done.stderr  # lines were rejected
    rejects = done.stdout.splitlines()
    assert [line.split(":")[0] for line in rejects] == ["line 61", "line 122", "line 123", "line 244"]
    assert "The database refused the event" in rejects[2]
    assert f"{serial.lines} events: {serial.stored} stored, {serial.rejected} rejected." in done.stderr
    assert (serial.lines, serial.stored, serial.rejected) == (244, 240, 4)
    assert graph_of(db, parallel_org.id) == graph_of(db, serial_org.id)


def test_a_clean_file_in_two_processes_exits_zero_and_a_second_import_changes_nothing(
    settings: Settings, db: Session, tmp_path: Path
) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in iter_synthetic_events(300, seed=8)))
    org = make_org(db, "acme")

    first = _import(settings, path, "acme")  # the default: several processes
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""
    assert "300 events: 300 stored, 0 rejected. Job lineage: 300 replaced." in first.stderr
    graph = graph_of(db, org.id)
    assert len(graph) == 300

    again = _import(settings, path, "acme", "--workers", "3")
    assert "300 events: 300 stored, 0 rejected. Job lineage: 300 unchanged." in again.stderr
    assert graph_of(db, org.id) == graph


def test_workers_out_of_range_is_a_usage_error(settings: Settings, db: Session, tmp_path: Path) -> None:
    make_org(db, "acme")
    path = tmp_path / "one.jsonl"
    path.write_bytes(orjson.dumps(orders_event()) + b"\n")
    done = _import(settings, path, "acme", "--workers", "0")
    assert done.returncode == 2
    assert "--workers" in done.stderr


def test_a_worker_that_dies_stops_the_import_with_a_clear_error(
    settings: Settings, db: Session, tmp_path: Path
) -> None:
    make_org(db, "acme")
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in iter_synthetic_events(2000, seed=4)))
    command = [sys.executable, "-m", "flask", "--app", "portal", "lineage", "import", str(path)]
    process = subprocess.Popen(
        [*command, "--org", "acme", "--workers", "2", "--batch-events", "5"],
        env=process_env(settings),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    deadline = time.monotonic() + 60
    workers: list[str] = []
    while len(workers) < 2 and process.poll() is None:  # the pool's two workers (and nothing else)
        assert time.monotonic() < deadline, "the workers did not start"
        workers = children.read_text().split() if children.exists() else []
        time.sleep(0.01)
    os.kill(int(workers[0]), signal.SIGKILL)  # as the kernel's out-of-memory killer would
    _stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "An import worker process ended without answering" in stderr
    assert "Traceback" not in stderr
