"""Event validation: lineage_core.lineage.parse against the validator it replaced, in the same run.

Prints one table per workload with, for each validator: events, mean size, time, events/s, µs per event,
peak memory (tracemalloc, on a separate pass: it slows the code it watches) and the speed relative to
the baseline, ``bench/parse_baseline.py`` (the validator as it was before the msgspec fast path).
``orjson.loads`` alone, which both validators start with, is the floor.

(a) valid synthetic RunEvents as bytes (``parse_event``, what the ingest API and the import call);
(b) the same events as decoded dicts (``check_event``, what the CLI and the tests call);
(c) the same events each broken in two places, so both validators build the full problem list;
(d) wide events: one output of 2,000 typed columns with column lineage (~0.4 MiB each).

Before timing, each workload's answers are compared: the same Events, or the same problems.
Not a test: run it by hand on an otherwise idle machine (numbers move with load; the load average at the
start is printed). Times are CPU seconds of this process (``time.process_time``: on a busy machine, less
moved by other processes than the wall clock), the best of ``--repeat`` passes taken in turns.

    .venv/bin/python -m bench.bench_validate              # 5,000 events per workload
    .venv/bin/python -m bench.bench_validate --quick      # 1,000
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from bench import parse_baseline
from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.lineage import parse

NOW = datetime(2026, 1, 2, tzinfo=UTC)  # just after the synthetic events' eventTimes
HEADER = ["validator", "events", "mean size", "CPU s", "events/s", "µs/event", "peak mem", "vs baseline"]


@dataclass
class Row:
    label: str
    events: int
    mean_bytes: float
    seconds: float
    peak_bytes: int


def _answer(read: Callable[..., Any], document: Any) -> Any:
    try:
        return read(document, now=NOW)
    except (parse.EventError, parse_baseline.EventError) as error:
        return [(p.field, p.code, p.message) for p in error.problems]


def _cpu_seconds(read: Callable[[Any], Any], documents: list[Any]) -> float:
    gc.collect()
    start = time.process_time()
    for document in documents:
        read(document)
    return time.process_time() - start


def _peak_bytes(read: Callable[[Any], Any], documents: list[Any]) -> int:
    gc.collect()
    tracemalloc.start()
    for document in documents:
        read(document)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def _tolerant(read: Callable[..., Any]) -> Callable[[Any], Any]:
    """``read`` with the clock fixed, an EventError being an answer like any other."""

    def call(document: Any) -> Any:
        try:
            return read(document, now=NOW)
        except parse.EventError:
            return None
        except parse_baseline.EventError:
            return None

    return call


def _workload(title: str, documents: list[Any], repeat: int, as_bytes: bool) -> None:
    sizes = [len(d) if as_bytes else len(orjson.dumps(d)) for d in documents]
    ours = parse.parse_event if as_bytes else parse.check_event
    theirs = parse_baseline.parse_event if as_bytes else parse_baseline.check_event
    different = sum(_answer(ours, d) != _answer(theirs, d) for d in documents)
    if different:
        raise SystemExit(f"{title}: {different} of {len(documents)} answers differ from the baseline's")
    validators = [("baseline (bench/parse_baseline.py)", _tolerant(theirs))]
    validators.append(("lineage_core.lineage.parse", _tolerant(ours)))
    if as_bytes:
        validators.insert(0, ("orjson.loads only (no checks)", orjson.loads))
    # The workload's documents are frozen out of the collector's view: a server holds one event at a
    # time, not thousands, and full collections walking them would be charged to whichever ran then.
    gc.collect()
    gc.freeze()
    # Passes take turns, so a change of load on the machine hits every validator alike.
    best = dict.fromkeys((label for label, _ in validators), float("inf"))
    for _ in range(repeat):
        for label, read in validators:
            best[label] = min(best[label], _cpu_seconds(read, documents))
    mean = statistics.fmean(sizes)
    rows = [
        Row(label, len(documents), mean, best[label], _peak_bytes(read, documents))
        for label, read in validators
    ]
    gc.unfreeze()
    baseline = rows[-2]
    cells = [
        [
            row.label,
            f"{row.events:,}",
            f"{row.mean_bytes / 1024:.1f} KiB",
            f"{row.seconds:.3f}",
            f"{row.events / row.seconds:,.0f}",
            f"{row.seconds / row.events * 1e6:,.1f}",
            f"{row.peak_bytes / 1024:,.0f} KiB",
            f"{baseline.seconds / row.seconds:.2f}x",
        ]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in [HEADER, *cells]) for i in range(len(HEADER))]
    print(f"\n{title} (answers checked: all {len(documents):,} the same as the baseline's)")
    for line in [HEADER, ["-" * w for w in widths], *cells]:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))


def _broken(event: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(event)
    broken["run"]["runId"] = "42"
    broken["outputs"][0]["facets"]["schema"]["fields"][0]["type"] = 5
    return broken


def _wide(event: dict[str, Any], columns: int) -> dict[str, Any]:
    wide = copy.deepcopy(event)
    output = wide["outputs"][0]
    source = wide["inputs"][0]
    output["facets"]["schema"]["fields"] = [
        {"name": f"column_{i}", "type": "VARCHAR", "description": f"Column {i} of the wide table."}
        for i in range(columns)
    ]
    output["facets"]["columnLineage"]["fields"] = {
        f"column_{i}": {
            "inputFields": [
                {
                    "namespace": source["namespace"],
                    "name": source["name"],
                    "field": f"source_{i}",
                    "transformations": [{"type": "DIRECT", "subtype": "IDENTITY", "masking": False}],
                }
            ]
        }
        for i in range(columns)
    }
    return wide


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 events per workload")
    parser.add_argument("--events", type=int, default=None, help="events per workload (default 5,000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per validator; the best counts")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    count = args.events or (1000 if args.quick else 5000)
    print(
        f"Python {sys.version.split()[0]}, orjson {version('orjson')}, msgspec {version('msgspec')}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; best of {args.repeat} passes"
    )
    events = list(iter_synthetic_events(jobs=count, seed=args.seed))
    bodies = [orjson.dumps(event) for event in events]
    _workload(f"(a) {count:,} valid RunEvents as bytes: parse_event", bodies, args.repeat, as_bytes=True)
    del bodies  # each workload runs with only its own documents in memory, as a server holds one event
    _workload("(b) the same as decoded dicts: check_event", events, args.repeat, as_bytes=False)
    broken = [orjson.dumps(_broken(event)) for event in events]
    wide_count = max(10, count // 50)
    sources = events[:wide_count]
    del events
    _workload("(c) the same, each with two problems: parse_event", broken, args.repeat, as_bytes=True)
    del broken
    wide = [orjson.dumps(_wide(event, 2000)) for event in sources]
    _workload(
        f"(d) {wide_count} wide RunEvents (2,000 columns): parse_event", wide, args.repeat, as_bytes=True
    )


if __name__ == "__main__":
    main()
