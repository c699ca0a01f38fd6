"""The connector card, history, Export now, pause and the "Read the export" panel."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from flask.testing import FlaskClient
from redis import Redis
from rq import Queue
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, Organization, RunStatus, utcnow
from tests.factories import make_connector, make_run
from tests.web import post_form

EXPORT_URL = "s3://acme-lineage/foundational/openlineage/openlineage-events.jsonl"


@pytest.fixture
def active(db: Session, org: Organization) -> Connector:
    return make_connector(
        db,
        org,
        role_name="Exporter",
        bucket_region="eu-west-1",
        verified_at=utcnow(),
        next_export_at=utcnow() + timedelta(days=3),
    )


def _post(client: FlaskClient, connector: Connector, action: str) -> str:
    response = post_form(
        client, "/integrations/openlineage", f"/integrations/openlineage/{connector.id}/{action}", {}
    )
    assert response.status_code == 302
    return client.get("/integrations/openlineage").get_data(as_text=True)


def test_card_shows_the_last_export_and_its_error(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    finished = utcnow().replace(microsecond=0)
    make_run(
        db,
        active,
        RunStatus.FAILED,
        queued_at=finished - timedelta(minutes=2),
        started_at=finished - timedelta(minutes=2),
        finished_at=finished,
        error=f"Could not write to {EXPORT_URL}: AccessDenied",
    )
    html = admin_client.get("/integrations/openlineage").get_data(as_text=True)
    assert "Failed" in html and finished.strftime("%Y-%m-%d %H:%M UTC") in html
    assert f"Could not write to {EXPORT_URL}" in html
    assert "Next export" in html


def test_export_now_queues_once(
    admin_client: FlaskClient, db: Session, settings: Settings, active: Connector
) -> None:
    html = _post(admin_client, active, "export-now")
    assert "Export started." in html
    assert "Export queued" in html
    html = _post(admin_client, active, "export-now")
    assert "already queued or running" in html
    runs = db.scalars(select(ExportRun)).all()
    assert [(r.status, r.trigger) for r in runs] == [(RunStatus.QUEUED, "manual")]
    assert len(Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url)).job_ids) == 1


def test_pause_and_resume(admin_client: FlaskClient, db: Session, active: Connector) -> None:
    _post(admin_client, active, "export-now")
    html = _post(admin_client, active, "pause")
    assert db.scalars(select(ExportRun)).all() == []  # the queued export is cancelled
    assert "Exports paused." in html and "Paused" in html
    db.expire_all()
    stored = db.get(Connector, active.id)
    assert stored is not None and stored.status is ConnectorStatus.PAUSED and stored.next_export_at is None
    html = _post(admin_client, active, "export-now")
    assert "Only an active connection can export" in html
    _post(admin_client, active, "resume")
    db.expire_all()
    stored = db.get(Connector, active.id)
    assert stored is not None and stored.status is ConnectorStatus.ACTIVE
    assert stored.next_export_at is not None  # never exported: due from activation


def test_history_lists_runs(admin_client: FlaskClient, db: Session, active: Connector) -> None:
    start = utcnow()
    make_run(
        db,
        active,
        RunStatus.SUCCEEDED,
        trigger="first",
        queued_at=start,
        started_at=start,
        finished_at=start + timedelta(seconds=42),
        events=1234,
        bytes=5_678_901,
    )
    html = admin_client.get(f"/integrations/openlineage/{active.id}/history").get_data(as_text=True)
    assert "Succeeded" in html and "42.0 s" in html and "1,234" in html and "5,678,901" in html


def test_card_and_history_say_what_the_300_kb_rule_did(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    start = utcnow()
    for trimmed, omitted, minutes in ((0, 0, 10), (1, 0, 5), (1_204, 2, 0)):
        make_run(
            db,
            active,
            RunStatus.SUCCEEDED,
            queued_at=start - timedelta(minutes=minutes),
            started_at=start - timedelta(minutes=minutes),
            finished_at=start - timedelta(minutes=minutes) + timedelta(seconds=9),
            events=50_000,
            bytes=1_000,
            trimmed=trimmed,
            omitted=omitted,
        )

    card = admin_client.get("/integrations/openlineage").get_data(as_text=True)
    assert (
        "1,204 events written with less detail to stay under 300 KB; "
        "2 jobs left out: too large even as table-level lineage." in card
    )
    history = admin_client.get(f"/integrations/openlineage/{active.id}/history").get_data(as_text=True)
    cells = re.findall(r'<td class="size-rule">(.*?)</td>', history)
    assert cells == [
        "1,204 events written with less detail to stay under 300 KB; "
        "2 jobs left out: too large even as table-level lineage",
        "1 event written with less detail to stay under 300 KB",
        "—",
    ]


def test_read_panel_gives_bucket_prefix_mask_and_a_least_privilege_policy(
    admin_client: FlaskClient, active: Connector
) -> None:
    html = admin_client.get(f"/integrations/openlineage/{active.id}/read").get_data(as_text=True)
    assert "*.jsonl" in html and "at least every <strong>14 days</strong>" in html
    policy_text = re.search(r'<pre id="reader-policy"[^>]*>(.*?)</pre>', html, re.S)
    assert policy_text
    policy = json.loads(policy_text.group(1).replace("&#34;", '"').replace("&quot;", '"'))
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert statements["ReadExport"] == {
        "Sid": "ReadExport",
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::acme-lineage/foundational/openlineage/*.jsonl",
    }
    assert statements["ListExport"]["Condition"] == {
        "StringLike": {"s3:prefix": ["foundational/openlineage", "foundational/openlineage/*"]}
    }
    assert statements["LocateBucket"]["Action"] == "s3:GetBucketLocation"
    # Read-only, nothing more: the spec's three actions, and reading the file's tags and checksum.
    assert statements["VerifyExport"] == {
        "Sid": "VerifyExport",
        "Effect": "Allow",
        "Action": ["s3:GetObjectTagging", "s3:GetObjectAttributes"],
        "Resource": "arn:aws:s3:::acme-lineage/foundational/openlineage/*.jsonl",
    }
    actions = {
        a
        for s in policy["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {
        "s3:GetObject",
        "s3:ListBucket",
        "s3:GetBucketLocation",
        "s3:GetObjectTagging",
        "s3:GetObjectAttributes",
    }
