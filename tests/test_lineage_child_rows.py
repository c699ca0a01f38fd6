"""A job's and a dataset's child rows go with them, though they have no foreign keys (migration 0011).

The ingest's child tables (fields, a job's datasets, reported column lineage) have no foreign keys to
their parents, for speed; triggers do what ``ON DELETE CASCADE`` did. Checked on PostgreSQL and on
SQLite, for a parent deleted directly and for one deleted with its organization.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Organization
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageJob,
    LineageJobDataset,
)
from lineage_core.lineage.parse import check_event
from tests.factories import make_org, orders_event

NOW = datetime(2024, 6, 1, tzinfo=UTC)
CHILDREN = (LineageColumnLineage, LineageDatasetField, LineageJobDataset)


def _counts(session: Session) -> dict[str, int]:
    return {
        model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
        for model in (LineageJob, LineageDataset, *CHILDREN)
    }


def _two_orgs_with_lineage(session: Session) -> tuple[Organization, Organization]:
    first, second = make_org(session, "first"), make_org(session, "second")
    for org in (first, second):
        store_event(session, org.id, check_event(orders_event(), now=NOW))
    return first, second


@pytest.fixture(params=["postgresql", "sqlite"])
def session(request: pytest.FixtureRequest, settings: Settings, tmp_path: object) -> Session:
    if request.param == "postgresql":
        url = settings.database_url
    else:
        url = request.getfixturevalue("sqlite_settings").database_url
    db = session_factory(url)()
    request.addfinalizer(db.close)
    return db


def test_deleting_an_organization_deletes_its_child_rows_and_no_others(session: Session) -> None:
    first, _second = _two_orgs_with_lineage(session)
    each = _counts(session)
    assert all(count > 0 and count % 2 == 0 for count in each.values()), each

    session.delete(first)
    session.commit()

    assert _counts(session) == {table: count // 2 for table, count in each.items()}


def test_deleting_a_job_deletes_its_datasets_links_and_column_lineage(session: Session) -> None:
    first, _second = _two_orgs_with_lineage(session)
    before = _counts(session)
    (job_id,) = session.scalars(select(LineageJob.id).where(LineageJob.organization_id == first.id))

    session.execute(delete(LineageJob).where(LineageJob.id == job_id))
    session.commit()

    after = _counts(session)
    for model in (LineageColumnLineage, LineageJobDataset):
        assert session.scalar(select(func.count()).select_from(model).where(model.job_id == job_id)) == 0
        assert after[model.__tablename__] == before[model.__tablename__] // 2
    assert after["lineage_dataset_fields"] == before["lineage_dataset_fields"]  # datasets stay


def test_deleting_datasets_deletes_their_fields_and_links(session: Session) -> None:
    first, _second = _two_orgs_with_lineage(session)
    before = _counts(session)

    session.execute(delete(LineageDataset).where(LineageDataset.organization_id == first.id))
    session.commit()

    after = _counts(session)
    assert after["lineage_dataset_fields"] == before["lineage_dataset_fields"] // 2
    assert after["lineage_job_datasets"] == before["lineage_job_datasets"] // 2


def test_truncating_organizations_empties_the_child_tables(settings: Settings, db: Session) -> None:
    # PostgreSQL only: SQLite has no TRUNCATE. The keys made TRUNCATE ... CASCADE reach these tables.
    _two_orgs_with_lineage(db)
    db.execute(text("TRUNCATE organizations CASCADE"))
    db.commit()
    assert set(_counts(db).values()) == {0}
