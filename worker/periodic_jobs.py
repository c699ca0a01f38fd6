"""The periodic jobs, declared as data, and their reconciliation with rq-scheduler.

rq-scheduler keeps scheduled jobs in Redis across restarts, so a changed or removed definition would
otherwise live on. At start the scheduler process calls :func:`reconcile`: each definition's job id
carries a hash of the definition, so changed ones get a new id; ids we own that are no longer
declared are cancelled. Redis is also where they get lost (a flush, a restart without persistence):
the scheduler calls :func:`restore_missing` at every loop. Keeping this in one module lets
rq-scheduler be swapped out later.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from rq_scheduler import Scheduler

ID_PREFIX = "periodic-"


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    func: str  # dotted path, so the scheduler never imports job code
    interval_seconds: int
    timeout_seconds: int

    @property
    def job_id(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]
        return f"{ID_PREFIX}{self.name}-{digest}"


PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    # Five minutes keeps "retry on the next nightly run" within minutes of 02:00 UTC, and a Redis
    # flush is repaired within one interval; each tick costs what the due connectors cost.
    PeriodicJob(
        name="enqueue-due-exports",
        func="worker.jobs.enqueue_due_exports",
        interval_seconds=300,
        timeout_seconds=600,
    ),
    # Organizations whose jobs or datasets changed get their column lineage derived from SQL again.
    PeriodicJob(
        name="enqueue-due-derivations",
        func="worker.jobs.enqueue_due_derivations",
        interval_seconds=120,
        timeout_seconds=300,
    ),
)


def reconcile(
    scheduler: Scheduler, queue_name: str, jobs: tuple[PeriodicJob, ...] = PERIODIC_JOBS
) -> dict[str, list[str]]:
    """Make rq-scheduler hold exactly ``jobs``. Returns the ids added and removed."""
    wanted = {job.job_id: job for job in jobs}
    present = {job.id for job in scheduler.get_jobs() if job.id.startswith(ID_PREFIX)}
    removed = sorted(present - wanted.keys())
    for job_id in removed:
        scheduler.cancel(job_id)
    added = restore_missing(scheduler, queue_name, jobs, present)
    return {"added": added, "removed": removed}


def restore_missing(
    scheduler: Scheduler,
    queue_name: str,
    jobs: tuple[PeriodicJob, ...] = PERIODIC_JOBS,
    present: set[str] | None = None,
) -> list[str]:
    """Schedule the declared jobs rq-scheduler does not hold (after a Redis flush or restart: none), due
    now. Removes nothing, so that two versions of the scheduler during a deploy do not undo each other.
    The scheduler process calls it at every loop. Returns the ids it added."""
    if present is None:
        present = {job.id for job in scheduler.get_jobs() if job.id.startswith(ID_PREFIX)}
    added = []
    for job in jobs:
        if job.job_id in present:
            continue
        scheduler.schedule(
            scheduled_time=datetime.now(UTC).replace(tzinfo=None),  # rq-scheduler works in naive UTC
            func=job.func,
            interval=job.interval_seconds,
            repeat=None,
            timeout=job.timeout_seconds,
            id=job.job_id,
            queue_name=queue_name,
            result_ttl=3600,
            description=f"periodic: {job.name}",
        )
        added.append(job.job_id)
    return added
