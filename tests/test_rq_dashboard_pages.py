"""rq-dashboard at /admin/rq/ works for operators: its own CSP (it needs eval), and 404s for what is missing.

The browser half (its tables actually load under that CSP) is in tests/test_browser_admin_walkthrough.py.
"""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq import Queue
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Role
from portal import create_app
from tests.factories import make_user
from tests.web import login


@pytest.fixture
def operator_app(settings: Settings, db: Session) -> Flask:
    make_user(db, None, "ops@vendor.test", Role.OPERATOR)
    # Exceptions become responses, as under gunicorn: a 500 shows as a 500, not a raised error.
    return create_app(test_config={"TESTING": True, "PROPAGATE_EXCEPTIONS": False}, settings=settings)


@pytest.fixture
def operator(operator_app: Flask) -> FlaskClient:
    client = operator_app.test_client()
    login(client, "ops@vendor.test")
    return client


def test_the_dashboard_has_a_csp_that_lets_it_run(operator: FlaskClient) -> None:
    policy = operator.get("/admin/rq/").headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self' 'unsafe-inline' 'unsafe-eval'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert directives["default-src"] == "'self'"
    # The rest of the portal keeps a policy without eval.
    other = operator.get("/ops/").headers.get("Content-Security-Policy", "")
    assert "unsafe-eval" not in other


@pytest.mark.parametrize(
    "url",
    [
        "/admin/rq/0/view/job/no-such-job",
        "/admin/rq/0/data/job/no-such-job.json",
        "/admin/rq/0/view/jobs/no-such-queue/queued/8/asc/1",
        "/admin/rq/0/data/jobs/no-such-queue/queued/8/asc/1.json",
        "/admin/rq/0/data/jobs/exports/no-such-registry/8/asc/1.json",
        "/admin/rq/0/data/jobs/exports/queued/eight/asc/1.json",
        "/admin/rq/3/view/queues",
    ],
)
def test_what_does_not_exist_is_a_404(operator: FlaskClient, url: str) -> None:
    response = operator.get(url)
    assert response.status_code == 404, (url, response.status_code)
    if url.endswith(".json"):
        assert response.is_json


def test_existing_queues_and_jobs_still_open(operator: FlaskClient, settings: Settings) -> None:
    queue = Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url))
    job = queue.enqueue("worker.jobs.export_connector", 1, job_id="export-run-1")
    assert operator.get(f"/admin/rq/0/view/job/{job.id}").status_code == 200
    assert operator.get(f"/admin/rq/0/data/job/{job.id}.json").get_json()["id"] == job.id
    listed = operator.get(f"/admin/rq/0/data/jobs/{settings.export_queue}/queued/8/asc/1.json").get_json()
    assert [j["id"] for j in listed["jobs"]] == [job.id]
    assert operator.get(f"/admin/rq/0/view/jobs/{settings.schedule_queue}/failed/8/asc/1").status_code == 200


def test_an_org_admin_learns_nothing_about_queues(admin_client: FlaskClient) -> None:
    assert admin_client.get("/admin/rq/0/view/job/no-such-job").status_code == 403
    assert admin_client.get("/admin/rq/0/view/jobs/no-such-queue/queued/8/asc/1").status_code == 403
