"""The whole schedule chain with real processes: rq-scheduler → tick job on a worker → export queued."""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import ExportRun, Organization, utcnow
from tests.factories import make_connector
from tests.services import running_process, running_worker


def test_the_scheduler_process_ticks_and_a_due_connector_gets_an_export(
    settings: Settings, aws: str, db: Session, org: Organization
) -> None:
    connector = make_connector(
        db,
        org,
        bucket="no-such-bucket",
        account_id="123456789012",
        role_name="Exporter",
        verified_at=utcnow() - timedelta(days=20),
        next_export_at=utcnow() - timedelta(minutes=1),
    )
    with running_worker(settings), running_process(settings, "worker.scheduler"):
        deadline = time.monotonic() + 60
        run = None
        while time.monotonic() < deadline:
            db.expire_all()
            run = db.scalars(select(ExportRun).where(ExportRun.connector_id == connector.id)).first()
            if run is not None:
                break
            time.sleep(0.2)
    assert run is not None, "no export was queued by the scheduled tick"
    assert run.trigger == "schedule"
