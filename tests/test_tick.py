"""The scheduler's tick against real PostgreSQL and Redis: due connectors, dedupe, repair after Redis loss."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis import Redis
from rq import Queue
from rq_scheduler import Scheduler
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.export.failures import INTERRUPTED_MESSAGE
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, Organization, RunStatus, utcnow
from lineage_core.schedule.rules import next_nightly_run_after
from lineage_core.schedule.tick import run_tick
from tests.factories import make_connector, make_run
from tests.services import flush_redis_except_claim
from worker.periodic_jobs import PeriodicJob, reconcile


def _connector(db: Session, org: Organization, n: int, **fields: Any) -> Connector:
    """Connector ``n``, due a minute ago unless ``fields`` say otherwise."""
    values: dict[str, Any] = {
        "bucket": f"bucket-{n}",
        "next_export_at": utcnow() - timedelta(minutes=1),
        **fields,
    }
    return make_connector(db, org, **values)


def _queue(settings: Settings) -> Queue:
    return Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url))


def test_due_connectors_are_enqueued_once(settings: Settings, db: Session, org: Organization) -> None:
    due = _connector(db, org, 1)
    _connector(db, org, 2, next_export_at=utcnow() + timedelta(days=3))  # not yet
    _connector(db, org, 3, status=ConnectorStatus.PAUSED)
    _connector(db, org, 4, status=ConnectorStatus.DRAFT)
    _connector(db, org, 5, next_export_at=None)

    report = run_tick(settings)
    assert report.enqueued == 1
    runs = db.scalars(select(ExportRun)).all()
    assert [(r.connector_id, r.status, r.trigger) for r in runs] == [(due.id, RunStatus.QUEUED, "schedule")]
    assert _queue(settings).job_ids == [f"export-run-{runs[0].id}"]

    again = run_tick(settings)
    assert again.enqueued == 0
    assert len(db.scalars(select(ExportRun)).all()) == 1
    assert len(_queue(settings).job_ids) == 1


def test_a_deleted_connector_is_never_exported(settings: Settings, db: Session, org: Organization) -> None:
    connector = _connector(db, org, 1)
    db.delete(connector)
    db.commit()
    assert run_tick(settings).enqueued == 0


def test_after_a_redis_flush_queued_runs_get_their_jobs_back(
    settings: Settings, db: Session, org: Organization
) -> None:
    _connector(db, org, 1)
    run_tick(settings)
    flush_redis_except_claim(settings.redis_url)
    assert _queue(settings).job_ids == []

    report = run_tick(settings, now=utcnow() + timedelta(minutes=5))
    assert report.requeued == 1 and report.enqueued == 0
    run = db.scalars(select(ExportRun)).one()
    assert _queue(settings).job_ids == [f"export-run-{run.id}"]


def test_a_running_run_whose_job_vanished_is_closed_and_retried_next_night(
    settings: Settings, db: Session, org: Organization
) -> None:
    connector = _connector(db, org, 1, next_export_at=None)
    started = utcnow() - timedelta(minutes=30)
    make_run(db, connector, RunStatus.RUNNING, queued_at=started, started_at=started, job_id="export-run-1")

    now = utcnow()
    report = run_tick(settings, now=now)
    assert report.closed == 1
    db.expire_all()
    run = db.scalars(select(ExportRun)).one()
    assert run.status is RunStatus.FAILED and run.error == INTERRUPTED_MESSAGE
    stored = db.get(Connector, connector.id)
    assert stored is not None and stored.next_export_at == next_nightly_run_after(now)
    assert report.enqueued == 0  # not before the next night


def test_a_run_that_just_started_is_left_alone(settings: Settings, db: Session, org: Organization) -> None:
    connector = _connector(db, org, 1, next_export_at=None)
    make_run(db, connector, RunStatus.RUNNING, started_at=utcnow(), job_id="export-run-1")
    assert run_tick(settings).closed == 0


def test_many_due_connectors_in_one_tick(settings: Settings, db: Session, org: Organization) -> None:
    for n in range(40):
        _connector(db, org, n)
    assert run_tick(settings).enqueued == 40
    assert len(_queue(settings).job_ids) == 40


@pytest.fixture
def scheduler(settings: Settings) -> Scheduler:
    return Scheduler(queue_name=settings.schedule_queue, connection=Redis.from_url(settings.redis_url))


def test_reconcile_adds_declared_jobs_and_is_idempotent(scheduler: Scheduler, settings: Settings) -> None:
    jobs = (PeriodicJob("tick", "worker.jobs.enqueue_due_exports", 300, 600),)
    first = reconcile(scheduler, settings.schedule_queue, jobs)
    assert first == {"added": [jobs[0].job_id], "removed": []}
    assert reconcile(scheduler, settings.schedule_queue, jobs) == {"added": [], "removed": []}
    (scheduled,) = scheduler.get_jobs()
    assert scheduled.func_name == "worker.jobs.enqueue_due_exports"
    assert scheduled.meta["interval"] == 300
    assert scheduled.origin == settings.schedule_queue


def test_reconcile_replaces_changed_and_removes_stale_jobs(scheduler: Scheduler, settings: Settings) -> None:
    old = PeriodicJob("tick", "worker.jobs.enqueue_due_exports", 300, 600)
    gone = PeriodicJob("cleanup", "worker.jobs.cleanup", 3600, 60)
    reconcile(scheduler, settings.schedule_queue, (old, gone))
    changed = PeriodicJob("tick", "worker.jobs.enqueue_due_exports", 120, 600)
    result = reconcile(scheduler, settings.schedule_queue, (changed,))
    assert result == {"added": [changed.job_id], "removed": sorted([old.job_id, gone.job_id])}
    assert [job.id for job in scheduler.get_jobs()] == [changed.job_id]


def test_reconcile_leaves_jobs_it_does_not_own(scheduler: Scheduler, settings: Settings) -> None:
    scheduler.schedule(
        datetime.now(UTC).replace(tzinfo=None), "some.other.job", interval=60, id="someone-elses"
    )
    reconcile(scheduler, settings.schedule_queue, ())
    assert [job.id for job in scheduler.get_jobs()] == ["someone-elses"]
