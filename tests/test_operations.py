"""Operator pages, rq-dashboard's guard, /healthz and /metrics."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, Organization, RunStatus, User, utcnow
from lineage_core.ops.heartbeats import TICK, record_beat
from portal import create_app
from tests.factories import make_connector, make_org, make_run
from tests.web import csrf_token_from, login


@pytest.fixture
def operator_client(client: FlaskClient, operator: User) -> FlaskClient:
    login(client, operator.email)
    return client


def _connector(db: Session, org: Organization, n: int) -> Connector:
    return make_connector(db, org, bucket=f"bucket-{n}", next_export_at=utcnow() + timedelta(days=n))


def _run(db: Session, connector: Connector, status: RunStatus, hours_ago: int) -> None:
    at = utcnow() - timedelta(hours=hours_ago)
    make_run(
        db,
        connector,
        status,
        queued_at=at,
        started_at=at,
        finished_at=at + timedelta(minutes=1),
        bytes=100,
        events=3,
    )


def test_operator_page_shows_every_org_with_consecutive_failures(
    operator_client: FlaskClient, db: Session, org: Organization
) -> None:
    other = make_org(db, "globex")
    healthy = _connector(db, org, 1)
    failing = _connector(db, other, 2)
    _run(db, healthy, RunStatus.SUCCEEDED, 5)
    _run(db, failing, RunStatus.FAILED, 80)
    _run(db, failing, RunStatus.SUCCEEDED, 50)
    _run(db, failing, RunStatus.FAILED, 26)
    _run(db, failing, RunStatus.FAILED, 2)

    html = operator_client.get("/ops/").get_data(as_text=True)
    assert "acme" in html and "globex" in html
    rows = html.split('<table id="connectors">')[1]
    first_row = rows.split("<tr")[2]
    assert "bucket-2" in first_row and "<td>2</td>" in first_row  # worst first: 2 failures since success
    assert "No worker is running" in html  # nothing started a worker in this test
    assert 'id="queues"' in html


def test_rq_dashboard_is_for_operators_only(admin_client: FlaskClient) -> None:
    assert admin_client.get("/admin/rq/").status_code == 403
    assert admin_client.get("/admin/rq/0/data/queues.json").status_code == 403


def test_rq_dashboard_requires_login(client: FlaskClient) -> None:
    response = client.get("/admin/rq/")
    assert response.status_code == 302 and response.headers["Location"].startswith("/login")


def test_rq_dashboard_works_for_operators(operator_client: FlaskClient, settings: Settings) -> None:
    response = operator_client.get("/admin/rq/")
    assert response.status_code == 200
    queues = operator_client.get("/admin/rq/0/data/queues.json")
    assert queues.status_code == 200
    assert "queues" in queues.get_json()


def test_rq_dashboard_post_works_without_csrf_but_requeue_all_refuses_get(
    operator_client: FlaskClient,
) -> None:
    assert operator_client.get("/admin/rq/requeue/exports").status_code == 405
    assert operator_client.post("/admin/rq/requeue/exports").status_code == 200


def test_rq_dashboard_app_factory_can_run_twice(settings: Settings) -> None:
    first: Flask = create_app(test_config={"TESTING": True}, settings=settings)
    second: Flask = create_app(test_config={"TESTING": True}, settings=settings)
    assert first.test_client().get("/admin/rq/").status_code == 302
    assert second.test_client().get("/admin/rq/").status_code == 302


def test_healthz_is_public_and_reports_each_dependency(client: FlaskClient, db: Session) -> None:
    record_beat(db, TICK, at=utcnow())
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.get_json()
    assert body.pop("last_tick_at") is not None
    assert body == {"status": "ok", "checks": {"database": "ok", "redis": "ok", "schedule": "ok"}}


def test_healthz_reports_redis_down(settings: Settings) -> None:
    app = create_app(
        test_config={"TESTING": True}, settings=replace(settings, redis_url="redis://127.0.0.1:9/0")
    )
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["checks"] == {"database": "ok", "redis": "unreachable", "schedule": "late"}


def test_metrics_need_a_token_or_an_operator(client: FlaskClient, admin: User) -> None:
    assert client.get("/metrics").status_code == 401
    login(client, admin.email)
    assert client.get("/metrics").status_code == 403


def test_metrics_with_the_bearer_token(settings: Settings, db: Session, org: Organization) -> None:
    token = "scrape-token-0123456789"
    app = create_app(test_config={"TESTING": True}, settings=replace(settings, metrics_token=token))
    connector = _connector(db, org, 1)
    _run(db, connector, RunStatus.SUCCEEDED, 3)
    _run(db, connector, RunStatus.FAILED, 1)
    client = app.test_client()
    assert (
        client.get("/metrics", headers={"Authorization": "Bearer wrong-token-000000000"}).status_code == 401
    )
    body = client.get("/metrics", headers={"Authorization": f"Bearer {token}"}).get_data(as_text=True)
    assert 'olx_export_runs_total{status="succeeded"} 1.0' in body
    assert 'olx_export_runs_total{status="failed"} 1.0' in body
    assert "olx_export_bytes_total 100.0" in body
    assert 'olx_queue_depth{queue="exports"} 0.0' in body
    assert 'olx_connectors{status="active"} 1.0' in body
    assert 'olx_export_duration_seconds{stat="max"} 60.0' in body
    assert "olx_lineage_jobs 0.0" in body and "olx_lineage_datasets 0.0" in body


def test_operator_pages_keep_csrf_for_our_own_forms(operator_client: FlaskClient) -> None:
    page = operator_client.get("/ops/").get_data(as_text=True)
    assert operator_client.post("/logout").status_code == 400  # no token
    assert operator_client.post("/logout", data={"csrf_token": csrf_token_from(page)}).status_code == 302
