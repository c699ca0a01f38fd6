"""What the derivation gave, for operators and admins: counts by outcome, and the jobs with problems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import orjson
from sqlalchemy import Table, func, select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Organization
from lineage_core.lineage.derivations import DERIVED, FAILED, PARTIAL
from lineage_core.lineage.models import LineageDerivation, LineageJob

_JOBS = cast(Table, LineageJob.__table__)
_DERIVATIONS = cast(Table, LineageDerivation.__table__)


@dataclass(frozen=True)
class DerivationCounts:
    """Jobs with SQL by the outcome of their derivation; ``waiting`` have none recorded yet."""

    derived: int
    partial: int
    failed: int
    waiting: int

    @property
    def with_problems(self) -> int:
        return self.partial + self.failed


def derivation_counts(session: Session, organization_id: int | None = None) -> DerivationCounts:
    """Counts across all organizations (operators), or for one."""
    by_status = select(_DERIVATIONS.c.status, func.count()).group_by(_DERIVATIONS.c.status)
    jobs_without = (
        select(func.count())
        .select_from(_JOBS)
        .where(
            _JOBS.c.sql.is_not(None),
            ~select(_DERIVATIONS.c.job_id).where(_DERIVATIONS.c.job_id == _JOBS.c.id).exists(),
        )
    )
    if organization_id is not None:
        by_status = by_status.where(_DERIVATIONS.c.organization_id == organization_id)
        jobs_without = jobs_without.where(_JOBS.c.organization_id == organization_id)
    counts: dict[str, int] = {status: int(count) for status, count in session.execute(by_status).all()}
    return DerivationCounts(
        derived=counts.get(DERIVED, 0),
        partial=counts.get(PARTIAL, 0),
        failed=counts.get(FAILED, 0),
        waiting=int(session.execute(jobs_without).scalar_one()),
    )


@dataclass(frozen=True)
class JobDerivationProblem:
    namespace: str
    name: str
    status: str
    problems: tuple[str, ...]
    unmatched_tables: tuple[str, ...]


def derivation_problems(
    session: Session, organization_id: int, limit: int = 1000
) -> list[JobDerivationProblem]:
    """The organization's jobs whose SQL could not be derived in full, and why."""
    rows = session.execute(
        select(
            _JOBS.c.namespace,
            _JOBS.c.name,
            _DERIVATIONS.c.status,
            _DERIVATIONS.c.problems,
            _DERIVATIONS.c.unmatched_tables,
        )
        .join(_JOBS, _JOBS.c.id == _DERIVATIONS.c.job_id)
        .where(_DERIVATIONS.c.organization_id == organization_id, _DERIVATIONS.c.status != DERIVED)
        .order_by(_JOBS.c.namespace, _JOBS.c.name)
        .limit(limit)
    ).all()
    return [
        JobDerivationProblem(
            namespace=namespace,
            name=name,
            status=status,
            problems=tuple(orjson.loads(problems)) if problems else (),
            unmatched_tables=tuple(orjson.loads(unmatched)) if unmatched else (),
        )
        for namespace, name, status, problems, unmatched in rows
    ]


@dataclass(frozen=True)
class OrganizationDerivations:
    organization: str  # slug
    counts: DerivationCounts


def derivation_counts_by_organization(session: Session) -> list[OrganizationDerivations]:
    """Per organization with SQL jobs (operators' view), those with problems or waiting jobs first."""
    by_status: dict[int, dict[str, int]] = {}
    for organization_id, status, count in session.execute(
        select(_DERIVATIONS.c.organization_id, _DERIVATIONS.c.status, func.count()).group_by(
            _DERIVATIONS.c.organization_id, _DERIVATIONS.c.status
        )
    ).all():
        by_status.setdefault(organization_id, {})[status] = int(count)
    waiting: dict[int, int] = dict(
        session.execute(
            select(_JOBS.c.organization_id, func.count())
            .where(
                _JOBS.c.sql.is_not(None),
                ~select(_DERIVATIONS.c.job_id).where(_DERIVATIONS.c.job_id == _JOBS.c.id).exists(),
            )
            .group_by(_JOBS.c.organization_id)
        ).all()
    )
    slugs = dict(session.execute(select(Organization.id, Organization.slug)).all())
    rows = [
        OrganizationDerivations(
            organization=slugs.get(organization_id, str(organization_id)),
            counts=DerivationCounts(
                derived=by_status.get(organization_id, {}).get(DERIVED, 0),
                partial=by_status.get(organization_id, {}).get(PARTIAL, 0),
                failed=by_status.get(organization_id, {}).get(FAILED, 0),
                waiting=int(waiting.get(organization_id, 0)),
            ),
        )
        for organization_id in sorted(set(by_status) | set(waiting))
    ]
    return sorted(rows, key=lambda row: (-row.counts.with_problems - row.counts.waiting, row.organization))
