"""Benchmark: the scheduler's tick over many connectors, a fraction of them due.

Shows that a tick's cost follows the number of *due* connectors, not the total: the due query reads
``ix_connectors_status_next_export`` only. Baseline, named in the table: the same tick over the same
number of due connectors in a table 10x smaller.

    .venv/bin/python bench/bench_tick.py [--sizes 10000,100000] [--due-fraction 0.1]

Needs PostgreSQL and Redis as the tests do (tests/services.py); creates and drops its own database.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redis import Redis
from rq import Queue
from sqlalchemy import insert, select, text

from lineage_core.infra import migrate
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine, session_factory
from lineage_core.infra.models import Connector, ConnectorStatus, Organization, utcnow
from lineage_core.schedule.tick import run_tick
from tests.services import flush_redis_except_claim, private_redis_db, throwaway_postgres_database


def _fill(database_url: str, total: int, due: int) -> None:
    engine = get_engine(database_url)
    now = utcnow()
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE export_runs, connectors, organizations RESTART IDENTITY CASCADE"))
        conn.execute(insert(Organization), [{"slug": "bench", "name": "bench", "created_at": now}])
        rows = []
        for n in range(total):
            is_due = n < due
            rows.append(
                {
                    "organization_id": 1,
                    "status": ConnectorStatus.ACTIVE,
                    "external_id": f"olx-bench-{n:028d}",
                    "bucket": f"bucket-{n}",
                    "prefix": "",
                    "account_id": "210987654321",
                    "role_name": "Exporter",
                    "role_path": "/",
                    "interval_days": 14,
                    "verified_at": now - timedelta(days=20),
                    "next_export_at": now - timedelta(minutes=1)
                    if is_due
                    else now + timedelta(days=1 + n % 13),
                    "created_at": now,
                    "updated_at": now,
                }
            )
            if len(rows) == 5000:
                conn.execute(insert(Connector), rows)
                rows = []
        if rows:
            conn.execute(insert(Connector), rows)
        conn.execute(text("ANALYZE connectors"))


def _measure(settings: Settings, total: int, due: int) -> dict[str, float]:
    _fill(settings.database_url, total, due)
    flush_redis_except_claim(settings.redis_url)
    session = session_factory(settings.database_url)()
    now = utcnow()
    started = time.perf_counter()
    selected = session.scalars(
        select(Connector.id)
        .where(Connector.status == ConnectorStatus.ACTIVE, Connector.next_export_at <= now)
        .order_by(Connector.next_export_at)
        .limit(1_000_000)
    ).all()
    select_s = time.perf_counter() - started
    session.close()
    assert len(selected) == due, (len(selected), due)

    started = time.perf_counter()
    report = run_tick(settings, now=now, limit=1_000_000)
    tick_s = time.perf_counter() - started
    assert report.enqueued == due, report
    queued = Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url)).count
    assert queued == due, queued
    return {"select_s": select_s, "tick_s": tick_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--due-fraction", type=float, default=0.1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with throwaway_postgres_database() as database_url, private_redis_db() as redis_url:
        migrate.upgrade(database_url)
        settings = Settings(
            database_url=database_url,
            redis_url=redis_url,
            secret_key="bench-secret-key-0000",
            vendor_account_id="123456789012",
            aws_endpoint_url=None,
            aws_region="us-east-1",
            require_external_id_enforcement=True,
            export_queue="exports",
            local_mode=False,
        )
        largest_due = int(max(sizes) * args.due_fraction)
        cases = [(size, int(size * args.due_fraction)) for size in sizes]
        # The baseline: as many due connectors as the largest case, in a table 10x smaller.
        baseline = (max(largest_due * 1, int(max(sizes) / 10)), largest_due)
        if baseline not in cases:
            cases.insert(0, baseline)
        results = {case: _measure(settings, *case) for case in cases}

    base = results[baseline]
    print(
        f"\nTick over connectors (PostgreSQL, Redis on loopback); baseline = {baseline[1]:,} due "
        f"among {baseline[0]:,}"
    )
    header = f"{'total':>9} {'due':>8} {'select ms':>10} {'tick s':>8} {'due/s':>9} {'select x base':>13} "
    header += f"{'tick x base':>11} {'peak RSS MB':>12}"
    print(header)
    print("-" * len(header))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for (total, due), r in results.items():
        select_ms, tick_s = r["select_s"] * 1000, r["tick_s"]
        print(
            f"{total:>9,} {due:>8,} {select_ms:>10.1f} {tick_s:>8.2f} {due / tick_s:>9,.0f} "
            f"{r['select_s'] / base['select_s']:>13.2f} {tick_s / base['tick_s']:>11.2f} {peak_mb:>12.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
