"""When derivation runs: a worker job per organization whose lineage graph changed.

The periodic job ``enqueue-due-derivations`` asks :func:`organizations_due`: an organization is due
when a job or dataset of it changed after its *watermark* (the newest change its last derivation
took into account), or when it was never derived and has SQL. Each due organization gets one
``worker.jobs.derive_lineage(org_id)`` job (one in flight at a time), which derives what changed
(:func:`lineage_core.lineage.derivations.derive_organization`) and then moves the watermark. Redis
holds only the queue: if a job is lost, the watermark has not moved and the next check finds the
organization again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any, cast

from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from sqlalchemy import Table, func, insert, select, union_all
from sqlalchemy.orm import Session

from lineage_core.export.queue import redis_connection
from lineage_core.infra.config import Settings
from lineage_core.infra.db import rowcount, session_factory
from lineage_core.infra.models import Organization, utcnow
from lineage_core.lineage.derivations import ENGINE_REVISION, DeriveReport, derive_organization
from lineage_core.lineage.models import LineageDataset, LineageDerivationWatermark, LineageJob

logger = logging.getLogger(__name__)

DERIVE_JOB = "worker.jobs.derive_lineage"
DERIVE_JOB_TIMEOUT_SECONDS = 3600
# How long after a change its transaction may still commit (and how far apart hosts' clocks may be):
# changes this recent are looked at again by the next pass.
SETTLE_MARGIN = timedelta(minutes=5)

_JOBS = cast(Table, LineageJob.__table__)
_DATASETS = cast(Table, LineageDataset.__table__)
_WATERMARKS = cast(Table, LineageDerivationWatermark.__table__)


def derive_organization_now(
    settings: Settings, organization_id: int, *, settle: timedelta = SETTLE_MARGIN
) -> DeriveReport:
    """The worker's job: derive what changed since the organization's watermark, then move it.

    The new watermark is the newest change read *before* deriving, and never later than ``settle``
    (:data:`SETTLE_MARGIN`) ago: an ingest transaction takes its ``updated_at`` when it starts and may
    commit after this read (or run on a host whose clock is a little behind), so the changes of the last
    few minutes are looked at again by the next pass (the source fingerprints make that cheap). An
    organization derived by another engine revision is derived again from scratch.
    """
    with session_factory(settings.database_url)() as session:
        held = session.execute(
            select(_WATERMARKS.c.changes_seen_at, _WATERMARKS.c.engine_revision).where(
                _WATERMARKS.c.organization_id == organization_id
            )
        ).one_or_none()
        since = held[0] if held is not None and held[1] == ENGINE_REVISION else None
        newest = _newest_change(session, organization_id)
        report = derive_organization(session, organization_id, since=since)
        if newest is not None:
            _set_watermark(session, organization_id, min(newest, utcnow() - settle))
            session.commit()
        return report


def _newest_change(session: Session, organization_id: int) -> datetime | None:
    newest: list[datetime] = [
        value
        for value in session.execute(
            union_all(
                select(func.max(_JOBS.c.updated_at)).where(_JOBS.c.organization_id == organization_id),
                select(func.max(_DATASETS.c.updated_at)).where(
                    _DATASETS.c.organization_id == organization_id
                ),
            )
        ).scalars()
        if value is not None
    ]
    return max(newest) if newest else None


def _set_watermark(session: Session, organization_id: int, changes_seen_at: datetime) -> None:
    values = {"changes_seen_at": changes_seen_at, "engine_revision": ENGINE_REVISION, "derived_at": utcnow()}
    updated = session.execute(
        _WATERMARKS.update().where(_WATERMARKS.c.organization_id == organization_id).values(**values)
    )
    if not rowcount(updated):
        session.execute(insert(_WATERMARKS).values(organization_id=organization_id, **values))


def organizations_due(session: Session) -> list[int]:
    """Organizations that may need deriving: never derived and with SQL, derived by another engine
    revision, or with a job or dataset changed after their watermark."""
    watermark = _WATERMARKS.c.changes_seen_at
    never_derived_with_sql = _WATERMARKS.c.organization_id.is_(None) & (
        select(_JOBS.c.id)
        .where(_JOBS.c.organization_id == Organization.id, _JOBS.c.sql.is_not(None))
        .exists()
    )
    other_engine = _WATERMARKS.c.engine_revision != ENGINE_REVISION
    job_changed = (
        select(_JOBS.c.id)
        .where(_JOBS.c.organization_id == Organization.id, _JOBS.c.updated_at > watermark)
        .exists()
    )
    dataset_changed = (
        select(_DATASETS.c.id)
        .where(_DATASETS.c.organization_id == Organization.id, _DATASETS.c.updated_at > watermark)
        .exists()
    )
    # One level of subqueries under a join of organizations and their watermark, so that each EXISTS
    # correlates with the organization's own row (a nested watermark subquery did not).
    return list(
        session.execute(
            select(Organization.id)
            .outerjoin(_WATERMARKS, _WATERMARKS.c.organization_id == Organization.id)
            .where(never_derived_with_sql | other_engine | job_changed | dataset_changed)
            .order_by(Organization.id)
        ).scalars()
    )


def derive_job_id(organization_id: int) -> str:
    return f"derive-org-{organization_id}"


def enqueue_due_derivations(settings: Settings) -> int:
    """Enqueue a derivation job for each organization that needs one and has none queued or running.

    Returns how many were enqueued. A Redis error is logged and counts as none: the next periodic run
    finds the same organizations again, since only a finished derivation moves their watermark.
    """
    with session_factory(settings.database_url)() as session:
        due = organizations_due(session)
    if not due:
        return 0
    enqueued = 0
    connection = redis_connection(settings)  # connects lazily: the first command may raise
    try:
        queue = Queue(settings.derive_queue, connection=connection)
        for organization_id in due:
            job_id = derive_job_id(organization_id)
            if _in_flight(job_id, connection):
                continue
            queue.enqueue(
                DERIVE_JOB,
                organization_id,
                job_id=job_id,
                job_timeout=DERIVE_JOB_TIMEOUT_SECONDS,
                result_ttl=24 * 3600,
                failure_ttl=7 * 24 * 3600,
                description=f"derive column lineage of organization {organization_id}",
            )
            enqueued += 1
    except RedisError as error:
        logger.warning("could not enqueue lineage derivations: %s", type(error).__name__)
    finally:
        connection.close()
    return enqueued


def _in_flight(job_id: str, connection: Any) -> bool:
    try:
        status = Job.fetch(job_id, connection=connection).get_status(refresh=False)
    except NoSuchJobError:
        return False
    return status in (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED)
