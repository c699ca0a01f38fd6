"""The synthetic organization generator: realistic, valid, deterministic."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import orjson
from sqlalchemy.orm import Session

from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.infra.models import Organization
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.merge import LineageOutcome
from lineage_core.lineage.parse import check_event
from tests.openlineage_spec import problems_of_file
from tests.readback import graph_of

VALIDATOR = Path(__file__).resolve().parents[2] / "shared" / "tools" / "validate_openlineage.py"


def test_same_seed_same_events_other_seed_other_events() -> None:
    assert list(iter_synthetic_events(30, seed=4)) == list(iter_synthetic_events(30, seed=4))
    assert list(iter_synthetic_events(30, seed=4)) != list(iter_synthetic_events(30, seed=5))


def test_the_graph_is_realistic() -> None:
    events = list(iter_synthetic_events(300, seed=1))
    namespaces = {d["namespace"].split("://")[0] for e in events for d in e["inputs"] + e["outputs"]}
    assert namespaces == {"postgres", "s3", "snowflake", "bigquery"}
    assert {e["job"]["facets"]["jobType"]["integration"] for e in events} == {"AIRFLOW", "DBT", "SPARK"}
    assert all(e["job"]["facets"]["sql"]["query"].startswith("INSERT INTO ") for e in events)

    transformations = Counter()
    masked = 0
    for e in events:
        lineage = e["outputs"][0]["facets"]["columnLineage"]
        for spec in lineage["fields"].values():
            for source in spec["inputFields"]:
                for t in source["transformations"]:
                    transformations[(t["type"], t["subtype"])] += 1
                    masked += t["masking"]
                    assert t["description"]
        for source in lineage["dataset"]:
            transformations[
                (source["transformations"][0]["type"], source["transformations"][0]["subtype"])
            ] += 1
        for field in e["outputs"][0]["facets"]["schema"]["fields"]:
            assert field["type"] and field["description"]
    assert {("DIRECT", s) for s in ("IDENTITY", "TRANSFORMATION", "AGGREGATION")} <= set(transformations)
    assert {("INDIRECT", s) for s in ("JOIN", "FILTER", "GROUP_BY", "SORT")} <= set(transformations)
    assert masked > 0

    # Multi-hop: follow outputs feeding later jobs' inputs.
    producer = {(o["namespace"], o["name"]): i for i, e in enumerate(events) for o in e["outputs"]}
    depth: dict[int, int] = {}
    for i, e in enumerate(events):
        parents = [
            producer[(d["namespace"], d["name"])]
            for d in e["inputs"]
            if (d["namespace"], d["name"]) in producer
        ]
        depth[i] = 1 + max((depth[p] for p in parents), default=0)
    assert max(depth.values()) >= 5


def test_every_event_passes_our_checks_and_stays_reasonably_sized() -> None:
    sizes = []
    for event in iter_synthetic_events(500, seed=2):
        check_event(event)
        sizes.append(len(orjson.dumps(event)))
    assert 3_000 < sum(sizes) / len(sizes) < 30_000
    assert max(sizes) < 100_000


def test_events_validate_against_the_official_schemas(tmp_path: Path) -> None:
    events = [orjson.dumps(e) for e in iter_synthetic_events(60, seed=9)]
    assert problems_of_file(events) == []
    if VALIDATOR.exists():  # the shared validator too, where the machine has it
        path = tmp_path / "events.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in events))
        result = subprocess.run(
            [sys.executable, str(VALIDATOR), str(path), "--strict", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert result.stdout.strip().splitlines()[-1] == "60 valid, 0 invalid"


def test_generating_twice_changes_nothing(db: Session, org: Organization) -> None:
    events = list(iter_synthetic_events(15, seed=3))
    first = [store_event(db, org.id, check_event(e)).lineage for e in events]
    assert set(first) == {LineageOutcome.REPLACED}
    graph = graph_of(db, org.id)
    second = [store_event(db, org.id, check_event(e)) for e in events]
    assert {r.lineage for r in second} == {LineageOutcome.UNCHANGED}
    assert not any(r.changed for r in second)
    assert graph_of(db, org.id) == graph
    assert all(job["lineage_event_time"] < datetime.now(UTC) for job in graph)
