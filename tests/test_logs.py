"""Logs are JSON lines with a request id: the same id in the response header, in the request's log
lines and in the lines of the RQ job it enqueued; and no line of a full walk through the product carries
a key, token, password, External ID or credential."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient
from redis import Redis
from rq import Queue, SimpleWorker
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.logs import JsonFormatter, RequestIdFilter, new_request_id
from lineage_core.infra.models import ApiKey, Connector, Organization, User
from lineage_core.setup.role_spec import RoleSpec
from portal.logging import REQUEST_ID_HEADER
from tests.factories import create_bucket, create_role_through_iam, make_connector, run_event
from tests.services import VENDOR_ACCOUNT_ID, process_env
from tests.web import PASSWORD, csrf_token_from, login, post_form, save, start_and_fill


class LogCapture:
    """Every line the root logger writes, formatted as production formats it, at production's level."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter())
        self.handler.addFilter(RequestIdFilter())

    def lines(self) -> list[str]:
        return [line for line in self.stream.getvalue().splitlines() if line]

    def records(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.lines()]


@pytest.fixture
def logs() -> Iterator[LogCapture]:
    capture = LogCapture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(capture.handler)
    root.setLevel(logging.INFO)
    try:
        yield capture
    finally:
        root.removeHandler(capture.handler)
        root.setLevel(previous)


@pytest.fixture
def job_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in process_env(settings).items():
        monkeypatch.setenv(name, value)


def _work_once(settings: Settings) -> None:
    connection = Redis.from_url(settings.redis_url)
    SimpleWorker([Queue(settings.export_queue, connection=connection)], connection=connection).work(
        burst=True
    )


def test_each_request_has_an_id_in_its_header_and_its_json_log_line(
    client: FlaskClient, logs: LogCapture
) -> None:
    first = client.get("/login?next=/private").headers[REQUEST_ID_HEADER]
    second = client.get("/login").headers[REQUEST_ID_HEADER]
    assert first != second and re.fullmatch(r"[0-9a-f]{32}", first)
    lines = [r for r in logs.records() if r["logger"] == "portal.request"]
    assert [r["request_id"] for r in lines] == [first, second]
    assert lines[0]["path"] == "/login" and lines[0]["status"] == 200 and "private" not in logs.lines()[0]
    assert {"time", "level", "message", "duration_ms"} <= set(lines[0])


def test_a_well_formed_offered_request_id_is_kept_and_others_replaced(client: FlaskClient) -> None:
    assert (
        client.get("/login", headers={REQUEST_ID_HEADER: "lb-1234abcd"}).headers[REQUEST_ID_HEADER]
        == "lb-1234abcd"
    )
    assert (
        client.get("/login", headers={REQUEST_ID_HEADER: "x forged"}).headers[REQUEST_ID_HEADER] != "x forged"
    )
    for bad in ("short", "x" * 65, "ünïcode-ids-here", "a\nb-12345678"):
        assert new_request_id(bad) != bad


def test_the_job_a_request_enqueued_logs_with_the_requests_id(
    aws: str, job_env: None, settings: Settings, admin_client: FlaskClient, db: Session, org: Organization,
    logs: LogCapture,
) -> None:  # fmt: skip
    connector = make_connector(db, org)
    page = admin_client.get("/integrations/openlineage").get_data(as_text=True)
    response = admin_client.post(
        f"/integrations/openlineage/{connector.id}/export-now", data={"csrf_token": csrf_token_from(page)}
    )
    request_id = response.headers[REQUEST_ID_HEADER]
    job = Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url)).jobs[0]
    assert job.meta["request_id"] == request_id
    before = len(logs.lines())
    _work_once(settings)  # the role does not exist in moto: the export fails, and says so in its lines
    # What the job's own code logs (the export, the AWS SDK in its upload threads) carries the id; RQ's
    # lines before and after the job (dequeue, "done") and the moto server's in this process do not.
    owners = ("lineage_core", "worker", "botocore")
    job_lines = [r for r in logs.records()[before:] if r["logger"].split(".")[0] in owners]
    assert len(job_lines) >= 2, logs.records()[before:]
    assert all(line.get("request_id") == request_id for line in job_lines), job_lines


def test_no_log_line_of_a_full_walk_carries_a_secret(
    aws: str, job_env: None, settings: Settings, client: FlaskClient, db: Session, admin: User,
    logs: LogCapture,
) -> None:  # fmt: skip
    wrong_password = "not-the-password-but-close"
    page = client.get("/login").get_data(as_text=True)
    client.post(
        "/login", data={"email": admin.email, "password": wrong_password, "csrf_token": csrf_token_from(page)}
    )
    login(client, admin.email)
    create_bucket(aws)
    connector = start_and_fill(client, db)
    spec = RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID)
    create_role_through_iam(aws, spec)
    assert client.get(f"/integrations/openlineage/{connector.id}/template.yaml").status_code == 200
    assert client.get(f"/integrations/openlineage/{connector.id}/terraform.zip").status_code == 200
    assert save(client, connector.id).status_code == 302
    created = post_form(client, "/api-keys/", None, {"name": "airflow-prod"}).get_data(as_text=True)
    secret = re.search(r"olk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", created)
    assert secret
    key = secret.group()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    assert client.post("/api/v1/lineage", data=orjson.dumps(run_event()), headers=headers).status_code == 201
    bad = {**headers, "Authorization": f"Bearer {key[:-4]}AAAA"}
    assert client.post("/api/v1/lineage", data=orjson.dumps(run_event()), headers=bad).status_code == 401
    _work_once(settings)  # the first export, queued by Save
    key_id = db.scalar(select(ApiKey.id))
    post_form(client, "/api-keys/", f"/api-keys/{key_id}/revoke", {})
    post_form(client, "/integrations/", "/logout", {})

    db.expire_all()
    external_id = db.scalars(select(Connector.external_id)).one()
    key_hash = db.scalar(select(ApiKey.key_hash))
    text = "\n".join(logs.lines())
    assert len(logs.lines()) > 20, text
    secrets = {
        "password": PASSWORD,
        "wrong password": wrong_password,
        "API key": key,
        "API key's secret part": key[13:],
        "API key hash": key_hash,
        "External ID": external_id,
        "SECRET_KEY": settings.secret_key,
    }
    for name, value in secrets.items():
        assert value and value not in text, f"a log line carries the {name}"
    for pattern in (
        r"ASIA[A-Z0-9]{16}",
        r"(?i)secret_?access_?key",
        r"(?i)session_?token",
        r"(?i)x-amz-security-token",
    ):
        assert not re.search(pattern, text), f"a log line matches {pattern}"
