"""Ingest throughput, CPU and peak memory of every way in, on PostgreSQL, side by side in one run.

Prints one table: for each size, the single-event endpoint (``POST /api/v1/lineage``, one event per
request, concurrent clients), the batch endpoint (``POST /api/v1/lineage/batch``, NDJSON of
``--batch`` events per request), the ``flask lineage import`` CLI (batches of 1000, with each of
``--import-workers`` worker processes), and the baseline "raw append" (bench/baseline.py: parse and
INSERT the event as one jsonb row per transaction, no checks, no merge) served and driven like the
single endpoint, plus the size of the events (synthetic
organizations from lineage_core.demo.synthetic, one COMPLETE RunEvent per job). Two passes per path:
"new jobs" (every event creates a job and writes its full lineage: the most expensive case) and
"re-runs" (the same jobs a day later: identical lineage, newer eventTime, the steady state of a
producer whose jobs run every day). CPU per event is given for the app (gunicorn's workers, or the
import process and its workers) and for PostgreSQL (the postmaster and every backend, from /proc: run
it where the database runs, on an otherwise idle machine, since other clients' work is counted too).

Not a test: run it by hand on an otherwise idle machine (numbers move with load).

    .venv/bin/python -m bench.bench_ingest --events 10000 100000

Needs PostgreSQL at TEST_PG_ADMIN_URL (default postgresql://postgres@127.0.0.1:5432/postgres); creates and
drops a database of its own.
"""

from __future__ import annotations

import argparse
import http.client
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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import psycopg
import requests

from lineage_core.accounts.api_keys import create_api_key
from lineage_core.accounts.organizations import create_organization
from lineage_core.demo.synthetic import DEFAULT_START, iter_synthetic_events
from lineage_core.infra import migrate
from lineage_core.infra.db import session_scope
from tests.services import PG_ADMIN_URL, free_port, throwaway_postgres_database

ROOT = Path(__file__).resolve().parents[1]
BASELINE_NAME = "raw append (parse + INSERT jsonb, 1 tx/event)"


@dataclass(frozen=True)
class Result:
    path: str
    what: str
    events: int
    seconds: float
    peak_rss_mb: float  # the largest peak (VmHWM) of one web worker, or of the import process
    cpu_seconds: float  # CPU (user + system) of the web workers or the import process
    pg_cpu_seconds: float  # CPU of PostgreSQL (postmaster, backends, background processes)
    errors: int
    client_cpu_seconds: float = 0.0  # CPU of the benchmark's posting threads (HTTP paths)
    # The busiest web worker's share of the app's CPU (HTTP paths): keep-alive connections stay with the
    # worker that accepted them, so one worker may serve most of them while another idles.
    busiest_share: float | None = None
    # Transaction ids the server assigned during the pass (cluster-wide: write transactions, aborted ones
    # and savepoints included): events per transaction tells how well group commit grouped single events.
    transactions: int | None = None

    @property
    def ceiling(self) -> float:
        """Events/s if every core of this machine did only this path's work (app, PG, client): the
        most this machine allows, whatever is overlapped."""
        return (
            (os.cpu_count() or 1)
            * self.events
            / (self.cpu_seconds + self.pg_cpu_seconds + self.client_cpu_seconds)
        )

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


def _children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def peak_rss_mb(pids: list[int]) -> float:
    """The largest peak RSS (VmHWM) among ``pids``: one web worker's high-water mark."""
    peak = 0
    for pid in pids:
        with suppress(FileNotFoundError, ProcessLookupError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
    return peak / 1024


def cpu_seconds(pids: list[int], with_exited_children: bool = False) -> float:
    """User + system CPU of ``pids`` so far (and of their children that exited, if asked)."""
    ticks = 0
    for pid in pids:
        with suppress(FileNotFoundError, ProcessLookupError):
            fields = _stat(pid)
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
            if with_exited_children:
                ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def postmaster_pid() -> int | None:
    """PostgreSQL's postmaster on this machine (its data directory's postmaster.pid), if readable."""
    with psycopg.connect(PG_ADMIN_URL) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    try:
        return int((Path(row[0]) / "postmaster.pid").read_text().split()[0]) if row else None
    except OSError:
        return None


def transaction_ids() -> int:
    """The cluster's next transaction id (taking one): the difference over a pass, less one, counts
    the write transactions of the pass, whichever database or client made them (run on an idle server)."""
    with psycopg.connect(PG_ADMIN_URL) as conn:
        row = conn.execute("SELECT txid_current()").fetchone()
        assert row is not None
        return int(row[0])


def pg_cpu_seconds(postmaster: int | None) -> float:
    """CPU of the postmaster, its live children (backends, walwriter...) and the children that exited."""
    if postmaster is None:
        return float("nan")
    return cpu_seconds([postmaster], with_exited_children=True) + cpu_seconds(_children(postmaster))


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
                if len(_children(process.pid)) >= workers:
                    break
            except (requests.ConnectionError, requests.Timeout):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"gunicorn {app} did not start") from None
            time.sleep(0.2)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def _requests(path: Path, batch: int) -> Iterator[bytes]:
    """The bodies to post: each line (batch 0), or NDJSON of up to ``batch`` lines and 15 MiB."""
    with path.open("rb") as lines:
        if batch == 0:
            yield from (line.rstrip(b"\n") for line in lines)
            return
        pending: list[bytes] = []
        size = 0
        for line in lines:
            if pending and (len(pending) == batch or size + len(line) > 15 * 1024 * 1024):
                yield b"".join(pending)
                pending, size = [], 0
            pending.append(line)
            size += len(line)
        if pending:
            yield b"".join(pending)


def _post(
    connection: http.client.HTTPConnection, target: str, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes]:
    """One POST on a kept-alive connection; sent again once on a new connection if the server had
    closed the old one (posting an event twice is harmless: the second changes nothing)."""
    for attempt in (1, 2):
        try:
            connection.request("POST", target, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            connection.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def post_all(url: str, path: Path, key: str | None, concurrency: int, batch: int = 0) -> tuple[float, int]:
    """Posts every line of ``path`` (one per request, or in batches) with ``concurrency`` threads.

    Returns (seconds, events not accepted). Each thread keeps one kept-alive connection (``http.client``:
    measured at under a third of ``requests``' CPU per request: the client runs on the cores the
    server is measured on).
    """
    lock = threading.Lock()
    errors = 0
    endpoint = urlsplit(url)
    if endpoint.scheme != "http":
        raise ValueError(f"the bench posts over plain HTTP only, not to {url}")
    target = endpoint.path.rstrip("/") + "/api/v1/lineage" + ("/batch" if batch else "")
    content_type = "application/x-ndjson" if batch else "application/json"
    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {key}"} if key else {})}
    bodies = _requests(path, batch)

    def worker() -> None:
        nonlocal errors
        connection = http.client.HTTPConnection(endpoint.hostname or "127.0.0.1", endpoint.port, timeout=300)
        try:
            while True:
                with lock:  # one shared reader: bounded memory whatever the file's size
                    body = next(bodies, None)
                if body is None:
                    return
                status, answer = _post(connection, target, body, headers)
                if batch:
                    lost = body.count(b"\n") if status != 200 else orjson.loads(answer)["rejected"]
                else:
                    lost = status != 201
                with lock:
                    errors += lost
        finally:
            connection.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return time.perf_counter() - start, errors


def run_child(
    command: list[str], database_url: str, postmaster: int | None
) -> tuple[float, float, float, float, int]:
    """Runs a command; returns (seconds, its peak RSS in MB, its CPU, PostgreSQL's CPU, exit status).

    The peak is the largest of the process and its children (the import's workers); the CPU includes
    the children's, which the process waits for.
    """
    pg_before = pg_cpu_seconds(postmaster)
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env_for(database_url), cwd=ROOT, stdout=subprocess.DEVNULL)
    # The child's own peak, polled from /proc: rusage's ru_maxrss would include this (large) process's
    # RSS at the moment of the fork, which the high-water mark keeps across exec.
    peak = 0.0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, peak_rss_mb([process.pid, *_children(process.pid)]))  # import workers too
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, peak, cpu, pg_cpu_seconds(postmaster) - pg_before, os.waitstatus_to_exitcode(status)


def vacuum(database_url: str) -> None:
    """VACUUM ANALYZE between two passes, outside their timing: what autovacuum does in production.

    This machine's server runs with autovacuum off. Each pass of re-runs leaves a dead row version of
    every job and dataset it moved, and a pass of one event per transaction leaves them in every page;
    without a vacuum the next pass walks past all of them (measured: the batch endpoint's new jobs at
    970/s after the single endpoint's 100k re-runs, 2,527/s without them).
    """
    with psycopg.connect(
        database_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True
    ) as conn:
        conn.execute("VACUUM (ANALYZE)")


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


def _http_pass(
    label: str, what: str, server: tuple[str, subprocess.Popen[bytes]], path: Path, key: str | None,
    args: argparse.Namespace, events: int, postmaster: int | None, batch: int = 0,
) -> Result:  # fmt: skip
    url, process = server
    workers = _children(process.pid)
    xid_before = transaction_ids()  # first: its backend's exit is not the pass's PostgreSQL CPU
    each_before = [cpu_seconds([worker]) for worker in workers]  # leave out start-up
    pg_before = pg_cpu_seconds(postmaster)
    client_before = time.process_time()  # only the posting threads run meanwhile
    concurrency = args.batch_concurrency if batch else args.concurrency
    seconds, errors = post_all(url, path, key, concurrency, batch)
    each = [cpu_seconds([worker]) - before for worker, before in zip(workers, each_before, strict=True)]
    cpu, pg_cpu = sum(each), pg_cpu_seconds(postmaster) - pg_before
    client = time.process_time() - client_before
    busiest = max(each) / cpu if cpu else None
    transactions = transaction_ids() - xid_before - 1
    return Result(
        label, what, events, seconds, peak_rss_mb(workers), cpu, pg_cpu, errors, client, busiest, transactions
    )


def bench_size(
    database_url: str, events: int, args: argparse.Namespace, workdir: Path, postmaster: int | None
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
    shape = f"gunicorn {args.workers}x{args.threads} gthread"
    single = f"{shape}, {args.concurrency} clients, 1 event/request"
    batched = f"{shape}, {args.batch_concurrency} clients, {args.batch} events/request (NDJSON)"

    with gunicorn("portal:create_app()", database_url, args.workers, args.threads) as server:
        for label, batch, what in (("single", 0, single), ("batch", args.batch, batched)):
            if label == "single" and events > args.single_max:
                continue
            slug = f"{label}-{events}"
            key = setup_org(database_url, slug)
            result = _http_pass(
                f"{label}, new jobs", what, server, path, key, args, events, postmaster, batch
            )
            results.append(replace(result, errors=result.errors + events - count_jobs(database_url, slug)))
            print(f"  {results[-1].path}: {results[-1].rate:.0f}/s", flush=True)
            vacuum(database_url)
            results.append(
                _http_pass(f"{label}, re-runs", what, server, reruns, key, args, events, postmaster, batch)
            )
            print(f"  {results[-1].path}: {results[-1].rate:.0f}/s", flush=True)
            vacuum(database_url)

    for workers in args.import_workers:
        slug = f"import-{events}-{workers}"
        setup_org(database_url, slug)
        flask = [
            sys.executable,
            "-m",
            "flask",
            "--app",
            "portal",
            "lineage",
            "import",
            "--workers",
            str(workers),
        ]
        what = f"flask lineage import ({workers} process{'es' if workers > 1 else ''}, batches of 1000)"
        label = f"import x{workers}"
        seconds, peak, cpu, pg_cpu, status = run_child(
            [*flask, str(path), "--org", slug], database_url, postmaster
        )
        errors = (status != 0) + (events - count_jobs(database_url, slug))
        results.append(Result(f"{label}, new jobs", what, events, seconds, peak, cpu, pg_cpu, errors))
        vacuum(database_url)
        seconds, peak, cpu, pg_cpu, status = run_child(
            [*flask, str(reruns), "--org", slug], database_url, postmaster
        )
        results.append(Result(f"{label}, re-runs", what, events, seconds, peak, cpu, pg_cpu, status))
        print(f"  {label}: {results[-2].rate:.0f}/s, {results[-1].rate:.0f}/s", flush=True)
        vacuum(database_url)

    if not args.skip_baseline:
        with psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_raw_events")
            conn.execute("CREATE TABLE bench_raw_events (id bigserial PRIMARY KEY, event jsonb NOT NULL)")
        if events <= args.single_max:
            with gunicorn("bench.baseline:app", database_url, args.workers, args.threads) as server:
                what = f"{BASELINE_NAME}, served like single"
                results.append(
                    _http_pass("HTTP baseline", what, server, path, None, args, events, postmaster)
                )
        baseline = [sys.executable, "-m", "bench.baseline", str(path), database_url]
        seconds, peak, cpu, pg_cpu, status = run_child(baseline, database_url, postmaster)
        what = f"{BASELINE_NAME}, 1 process"
        results.append(Result("import baseline", what, events, seconds, peak, cpu, pg_cpu, status))
    path.unlink()
    reruns.unlink()
    return results, (mean_size, max_size)


def print_table(rows: list[Result], sizes: dict[int, tuple[float, int]]) -> None:
    header = (
        f"| {'path':<19} | {'events':>7} | {'time s':>7} | {'events/s':>8} | {'app ms/event':>12} "
        f"| {'PG ms/event':>11} | {'client ms/event':>15} | {'CPU ceiling/s':>13} | {'busiest worker':>14} "
        f"| {'events/tx':>9} | {'peak RSS MB':>11} | {'errors':>6} | how"
    )
    print()
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|---")
    for row in rows:
        print(
            f"| {row.path:<19} | {row.events:>7} | {row.seconds:>7.1f} | {row.rate:>8.0f} | "
            f"{row.cpu_seconds / row.events * 1000:>12.2f} | "
            f"{row.pg_cpu_seconds / row.events * 1000:>11.2f} | "
            f"{row.client_cpu_seconds / row.events * 1000:>15.2f} | {row.ceiling:>13.0f} | "
            f"{_share(row.busiest_share):>14} | {_per_transaction(row):>9} | {row.peak_rss_mb:>11.0f} | "
            f"{row.errors:>6} | {row.what}"
        )
    print()
    for events, (mean, biggest) in sizes.items():
        print(
            f"Events of the {events} run: mean {mean / 1024:.1f} KiB, max {biggest / 1024:.1f} KiB "
            f"(synthetic, seed {events})."
        )
    print(f"Baseline: {BASELINE_NAME}.")
    print(
        "CPU: app = gunicorn's workers after start-up (or the import process), PG = the postmaster and all "
        "its processes, client = the benchmark's posting threads (HTTP paths; they run on the same "
        "machine). CPU ceiling = cores / (app + PG + client CPU per event): the most events/s this "
        "machine's cores allow for that work. Busiest worker: the share of the app's CPU spent by its "
        "busiest gunicorn worker (a keep-alive connection stays with the worker that accepted it: an "
        "even spread is 100% divided by the workers, near 100% is one worker serving nearly all). "
        "Events/tx: events per transaction id the server assigned during the pass (HTTP paths; "
        "single events share one under group commit, so CPU per event falls as it grows). Peak "
        "RSS: the largest VmHWM of one web worker (or the import process)."
    )
    print(
        f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
        f"client RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB."
    )


def _per_transaction(row: Result) -> str:
    return "" if not row.transactions else f"{row.events / row.transactions:.2f}"


def _share(share: float | None) -> str:
    return "" if share is None else f"{share * 100:.0f}%"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, nargs="+", default=[10_000])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8, help="client threads, single endpoint")
    parser.add_argument("--batch", type=int, default=1000, help="events per batch request")
    # One more poster than cores: while one request's events are parsed, the others' wait on the database.
    parser.add_argument("--batch-concurrency", type=int, default=3, help="client threads, batch endpoint")
    parser.add_argument(
        "--single-max", type=int, default=100_000, help="skip the one-event-per-request paths above this size"
    )
    parser.add_argument(
        "--import-workers", type=int, nargs="+", default=[1, 2], help="flask lineage import --workers, each"
    )
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()

    rows: list[Result] = []
    sizes: dict[int, tuple[float, int]] = {}
    postmaster = postmaster_pid()
    with throwaway_postgres_database() as database_url, tempfile.TemporaryDirectory() as tmp:
        migrate.upgrade(database_url)
        for events in args.events:
            results, sizes[events] = bench_size(database_url, events, args, Path(tmp), postmaster)
            rows += results
    print_table(rows, sizes)
    print(
        "Between passes, untimed: VACUUM ANALYZE (autovacuum's work; off on this machine's server). "
        "Within a pass no statistics are refreshed: each pass's organization is new to them."
    )


if __name__ == "__main__":
    main()
