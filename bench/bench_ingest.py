"""Ingest throughput and peak memory, through the HTTP API and through the file import, on PostgreSQL.

Prints one table: for each size, the real paths (gunicorn + concurrent client over loopback; the
``flask lineage import`` CLI) next to the baseline "raw append" (bench/baseline.py: parse and INSERT the
event as one jsonb row per transaction, no checks, no merge) served and driven the same way, plus the
size of the events (synthetic organizations from lineage_core.demo.synthetic, one COMPLETE RunEvent
per job). Two passes per path: "new jobs" (every event creates a job and writes its full lineage: the
most expensive case) and "re-runs" (the same jobs a day later: identical lineage, newer eventTime, the
steady state of a producer whose jobs run every day).

Not a test: run it by hand on an otherwise idle machine (numbers move with load).

    .venv/bin/python -m bench.bench_ingest --events 10000 100000

Needs PostgreSQL at TEST_PG_ADMIN_URL (default postgresql://postgres@127.0.0.1:5432/postgres); creates and
drops a database of its own.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import psycopg
import requests

from lineage_core.accounts.api_keys import create_api_key
from lineage_core.accounts.organizations import create_organization
from lineage_core.demo.synthetic import DEFAULT_START, iter_synthetic_events
from lineage_core.infra import migrate
from lineage_core.infra.db import session_scope
from tests.services import free_port, throwaway_postgres_database

ROOT = Path(__file__).resolve().parents[1]
BASELINE_NAME = "raw append (parse + INSERT jsonb, 1 tx/event)"


@dataclass(frozen=True)
class Result:
    path: str
    what: str
    events: int
    seconds: float
    peak_rss_mb: float
    cpu_seconds: float  # CPU (user + system) of the server or import process(es), not of PostgreSQL
    errors: int

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def env_for(database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "BASELINE_DATABASE_URL": database_url,
        "SECRET_KEY": "benchmark-secret-key-not-for-production",
        "VENDOR_AWS_ACCOUNT_ID": "123456789012",
        "PYTHONPATH": str(ROOT),
    }


def write_events(path: Path, count: int, seed: int, start: datetime = DEFAULT_START) -> tuple[float, int]:
    """Writes ``count`` synthetic events; returns (mean, max) event size in bytes."""
    sizes = []
    with path.open("wb") as out:
        for event in iter_synthetic_events(count, seed, start=start):
            line = orjson.dumps(event)
            sizes.append(len(line))
            out.write(line + b"\n")
    return statistics.fmean(sizes), max(sizes)


def _tree(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [pid, *(int(p) for p in children.read_text().split())] if children.exists() else [pid]


def peak_rss_mb(pid: int) -> float:
    """Peak RSS (VmHWM) of a process and its children, summed: gunicorn's master and workers."""
    total = 0
    for each in _tree(pid):
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total / 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children so far."""
    ticks = 0
    for each in _tree(pid):
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@contextmanager
def gunicorn(
    app: str, database_url: str, workers: int, threads: int
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "--workers", str(workers), "--worker-class", "gthread",
        "--threads", str(threads), "--bind", f"127.0.0.1:{port}", "--log-level", "warning", app,
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env_for(database_url), cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(url, timeout=5)
                break
            except (requests.ConnectionError, requests.Timeout):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"gunicorn {app} did not start") from None
                time.sleep(0.2)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def post_all(url: str, path: Path, key: str | None, concurrency: int) -> tuple[float, int]:
    """Posts every line of ``path`` with ``concurrency`` threads; returns (seconds, non-201 answers)."""
    lock = threading.Lock()
    errors = 0
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}

    def worker(lines: Iterator[bytes]) -> None:
        nonlocal errors
        session = requests.Session()
        while True:
            with lock:  # one shared reader: bounded memory whatever the file's size
                line = next(lines, None)
            if line is None:
                return
            response = session.post(f"{url}/api/v1/lineage", data=line, headers=headers, timeout=60)
            if response.status_code != 201:
                with lock:
                    errors += 1

    with path.open("rb") as lines:
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            for future in [pool.submit(worker, iter(lines)) for _ in range(concurrency)]:
                future.result()
        return time.perf_counter() - start, errors


def run_child(command: list[str], database_url: str) -> tuple[float, float, float, int]:
    """Runs a command; returns (seconds, its peak RSS in MB, its CPU seconds, exit status)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env_for(database_url), cwd=ROOT, stdout=subprocess.DEVNULL)
    # The child's own peak, polled from /proc: rusage's ru_maxrss would include this (large) process's
    # RSS at the moment of the fork, which the high-water mark keeps across exec.
    peak = 0.0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        with suppress(FileNotFoundError, ProcessLookupError):
            peak = max(peak, peak_rss_mb(process.pid))
        time.sleep(0.2)
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start, peak, cpu, os.waitstatus_to_exitcode(status)


def setup_org(database_url: str, slug: str) -> str:
    with session_scope(database_url) as session:
        org = create_organization(session, slug)
        return create_api_key(session, org.id, "bench").secret


def count_jobs(database_url: str, slug: str) -> int:
    plain = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain) as conn:
        row = conn.execute(
            "SELECT count(*) FROM lineage_jobs j JOIN organizations o ON o.id = j.organization_id "
            "WHERE o.slug = %s",
            (slug,),
        ).fetchone()
        return int(row[0]) if row else 0


def bench_size(
    database_url: str, events: int, args: argparse.Namespace, workdir: Path
) -> tuple[list[Result], tuple[float, int]]:
    path = workdir / f"events-{events}.jsonl"
    mean_size, max_size = write_events(path, events, seed=events)
    # The same jobs run again a day later: the steady state of a producer (same lineage, newer time).
    reruns = workdir / f"reruns-{events}.jsonl"
    write_events(reruns, events, seed=events, start=DEFAULT_START + timedelta(days=1))
    print(
        f"# {events} events: mean {mean_size / 1024:.1f} KiB, max {max_size / 1024:.1f} KiB per event",
        flush=True,
    )
    results = []
    shape = f"gunicorn {args.workers}x{args.threads} gthread, {args.concurrency} client threads"

    key = setup_org(database_url, f"http-{events}")
    with gunicorn("portal:create_app()", database_url, args.workers, args.threads) as (url, process):
        cpu_before = cpu_seconds(process.pid)  # leave out start-up (imports)
        seconds, errors = post_all(url, path, key, args.concurrency)
        peak, cpu = peak_rss_mb(process.pid), cpu_seconds(process.pid) - cpu_before
        stored = count_jobs(database_url, f"http-{events}")
        results.append(
            Result("HTTP API, new jobs", shape, events, seconds, peak, cpu, errors + (events - stored))
        )
        cpu_before = cpu_seconds(process.pid)
        seconds, errors = post_all(url, reruns, key, args.concurrency)
        peak, cpu = peak_rss_mb(process.pid), cpu_seconds(process.pid) - cpu_before
        results.append(Result("HTTP API, re-runs", shape, events, seconds, peak, cpu, errors))

    if not args.skip_baseline:
        with psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_raw_events")
            conn.execute("CREATE TABLE bench_raw_events (id bigserial PRIMARY KEY, event jsonb NOT NULL)")
        with gunicorn("bench.baseline:app", database_url, args.workers, args.threads) as (url, process):
            cpu_before = cpu_seconds(process.pid)
            seconds, errors = post_all(url, path, None, args.concurrency)
            peak, cpu = peak_rss_mb(process.pid), cpu_seconds(process.pid) - cpu_before
        what = f"{BASELINE_NAME}, same server and client"
        results.append(Result("HTTP baseline", what, events, seconds, peak, cpu, errors))

    slug = f"import-{events}"
    setup_org(database_url, slug)
    flask = [sys.executable, "-m", "flask", "--app", "portal", "lineage", "import", str(path), "--org", slug]
    seconds, peak, cpu, status = run_child(flask, database_url)
    stored = count_jobs(database_url, slug)
    what = "flask lineage import (1 process)"
    results.append(
        Result("import, new jobs", what, events, seconds, peak, cpu, (status != 0) + (events - stored))
    )
    seconds, peak, cpu, status = run_child([*flask[:-3], str(reruns), "--org", slug], database_url)
    results.append(Result("import, re-runs", what, events, seconds, peak, cpu, status))

    if not args.skip_baseline:
        baseline = [sys.executable, "-m", "bench.baseline", str(path), database_url]
        seconds, peak, cpu, status = run_child(baseline, database_url)
        results.append(
            Result("import baseline", f"{BASELINE_NAME}, 1 process", events, seconds, peak, cpu, status)
        )
    path.unlink()
    reruns.unlink()
    return results, (mean_size, max_size)


def print_table(rows: list[Result], sizes: dict[int, tuple[float, int]]) -> None:
    header = (
        f"| {'path':<18} | {'events':>7} | {'time s':>7} | {'events/s':>8} | {'peak RSS MB':>11} "
        f"| {'CPU ms/event':>12} | {'errors':>6} | how"
    )
    print()
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|---")
    for row in rows:
        print(
            f"| {row.path:<18} | {row.events:>7} | {row.seconds:>7.1f} | {row.rate:>8.0f} | "
            f"{row.peak_rss_mb:>11.0f} | {row.cpu_seconds / row.events * 1000:>12.2f} | {row.errors:>6} "
            f"| {row.what}"
        )
    print()
    for events, (mean, biggest) in sizes.items():
        print(
            f"Events of the {events} run: mean {mean / 1024:.1f} KiB, max {biggest / 1024:.1f} KiB "
            f"(synthetic, seed {events})."
        )
    print(f"Baseline: {BASELINE_NAME}.")
    print(
        "Peak RSS and CPU: HTTP = gunicorn master + workers (VmHWM; CPU after start-up), "
        "import = the process; PostgreSQL's own CPU is not included."
    )
    print(
        f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
        f"client RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, nargs="+", default=[10_000])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()

    rows: list[Result] = []
    sizes: dict[int, tuple[float, int]] = {}
    with throwaway_postgres_database() as database_url, tempfile.TemporaryDirectory() as tmp:
        migrate.upgrade(database_url)
        for events in args.events:
            results, sizes[events] = bench_size(database_url, events, args, Path(tmp))
            rows += results
    print_table(rows, sizes)


if __name__ == "__main__":
    main()
