"""POST /api/v1/lineage through the Flask test client: every bad input, auth, size, isolation."""

from __future__ import annotations

import copy
import gzip
from typing import Any

import orjson
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import revoke_api_key
from lineage_core.infra.config import Settings
from lineage_core.infra.models import ApiKey, Organization
from lineage_core.lineage.models import (
    LineageColumnLineage,
    LineageDataset,
    LineageDatasetField,
    LineageJob,
    LineageJobDataset,
)
from portal import create_app
from tests.factories import make_key, make_org, orders_event, run_event
from tests.readback import graph_of

URL = "/api/v1/lineage"
TABLES = (LineageJob, LineageDataset, LineageDatasetField, LineageJobDataset, LineageColumnLineage)


@pytest.fixture
def key(db: Session, org: Organization) -> str:
    return make_key(db, org)


def post(client: FlaskClient, body: Any, key: str | None, **headers: str) -> Any:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    all_headers = {"Content-Type": "application/json", **headers}
    if key is not None:
        all_headers["Authorization"] = f"Bearer {key}"
    return client.post(URL, data=data, headers=all_headers)


def row_counts(db: Session) -> list[int]:
    counts = [db.scalar(select(func.count()).select_from(table)) or 0 for table in TABLES]
    db.rollback()
    return counts


def assert_error(response: Any, status: int, error: str, field: str) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert (body["error"], body["field"]) == (error, field)
    assert body["message"] and body["problems"][0]["field"] == field
    return body  # type: ignore[no-any-return]


def test_an_event_is_stored_and_the_answer_says_what_changed(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    response = post(client, orders_event(), key)
    assert response.status_code == 201
    assert response.get_json() == {
        "status": "accepted",
        "lineage": "replaced",
        "jobFacetsUpdated": ["documentation", "sql", "jobType"],
        "datasetFacetsUpdated": 4,  # two input schemas, the output schema and its docs
    }
    (job,) = graph_of(db, org.id)
    assert job["name"] == "etl.orders_daily"
    assert db.scalar(select(ApiKey.last_used_at)) is not None

    again = post(client, orders_event(), key)
    assert again.status_code == 201
    assert again.get_json()["lineage"] == "unchanged"


def _bad(change: Any) -> bytes:
    event = copy.deepcopy(orders_event())
    change(event)
    return orjson.dumps(event)


BAD_INPUTS = [
    pytest.param(b'{"eventType": "COMPLETE", "run": ', "malformed_json", "body", id="malformed-json"),
    pytest.param(b"", "malformed_json", "body", id="empty-body"),
    pytest.param(b"\xff\xfe{}", "malformed_json", "body", id="not-utf8"),
    pytest.param(_bad(lambda e: e.update(eventTime=12)), "invalid_event", "eventTime", id="wrong-type"),
    pytest.param(
        _bad(lambda e: e["outputs"][0]["facets"]["schema"]["fields"][0].update(name=None)),
        "invalid_event",
        "outputs[0].facets.schema.fields[0].name",
        id="wrong-type-deep",
    ),
    pytest.param(
        _bad(lambda e: e["job"].pop("namespace")), "invalid_event", "job.namespace", id="missing-field"
    ),
    pytest.param(_bad(lambda e: e.pop("run")), "invalid_event", "run", id="missing-run"),
    pytest.param(_bad(lambda e: e["run"].update(runId="1234")), "invalid_event", "run.runId", id="bad-uuid"),
    pytest.param(
        _bad(lambda e: e.update(eventTime="2024-05-01T12:00:00")),
        "invalid_event",
        "eventTime",
        id="no-offset",
    ),
    pytest.param(
        _bad(lambda e: e.update(eventType="SUCCEEDED")), "invalid_event", "eventType", id="unknown-event-type"
    ),
    pytest.param(orjson.dumps([1, 2]), "invalid_event", "event", id="not-an-object"),
]


@pytest.mark.parametrize(("body", "error", "field"), BAD_INPUTS)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(
    client: FlaskClient, db: Session, key: str, body: bytes, error: str, field: str
) -> None:
    before = row_counts(db)
    assert_error(post(client, body, key), 400, error, field)
    assert row_counts(db) == before == [0, 0, 0, 0, 0]
    assert db.scalar(select(ApiKey.last_used_at)) is None
    # The server keeps answering normally.
    assert post(client, orders_event(), key).status_code == 201


def test_a_body_over_the_limit_is_a_413(settings: Settings, db: Session, key: str) -> None:
    app = create_app(test_config={"TESTING": True, "LINEAGE_MAX_EVENT_BYTES": 6000}, settings=settings)
    client = app.test_client()
    big = orders_event()
    big["job"]["facets"]["sql"]["query"] = "SELECT " + "x" * 6000
    assert_error(post(client, big, key), 413, "payload_too_large", "body")
    # Compressed it is small, but it is the decompressed size that counts.
    compressed = gzip.compress(orjson.dumps(big))
    assert len(compressed) < 6000
    assert_error(
        post(client, compressed, key, **{"Content-Encoding": "gzip"}), 413, "payload_too_large", "body"
    )
    assert row_counts(db) == [0, 0, 0, 0, 0]
    assert post(client, orders_event(), key).status_code == 201


def test_the_app_wide_limit_answers_in_json_too(settings: Settings, key: str) -> None:
    app = create_app(
        test_config={"TESTING": True, "MAX_CONTENT_LENGTH": 1000, "LINEAGE_MAX_EVENT_BYTES": 10**6},
        settings=settings,
    )
    assert_error(post(app.test_client(), orders_event(), key), 413, "payload_too_large", "body")


def test_gzip_bodies_are_accepted(client: FlaskClient, db: Session, org: Organization, key: str) -> None:
    response = post(client, gzip.compress(orjson.dumps(orders_event())), key, **{"Content-Encoding": "gzip"})
    assert response.status_code == 201
    assert graph_of(db, org.id)[0]["name"] == "etl.orders_daily"
    assert_error(
        post(client, b"not gzip", key, **{"Content-Encoding": "gzip"}), 400, "malformed_body", "body"
    )


def test_an_event_split_over_two_gzip_members_is_read_whole(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    body = orjson.dumps(orders_event())
    two_members = gzip.compress(body[:100]) + gzip.compress(body[100:])
    response = post(client, two_members, key, **{"Content-Encoding": "gzip"})
    assert response.status_code == 201, response.get_data(as_text=True)[:500]
    assert graph_of(db, org.id)[0]["name"] == "etl.orders_daily"


@pytest.mark.parametrize(
    ("headers", "field"),
    [({"Content-Type": "text/plain"}, "Content-Type"), ({"Content-Encoding": "br"}, "Content-Encoding")],
)
def test_unsupported_encodings_are_a_415(
    client: FlaskClient, key: str, headers: dict[str, str], field: str
) -> None:
    assert_error(post(client, orders_event(), key, **headers), 415, "unsupported_media_type", field)


def test_missing_wrong_and_revoked_keys_are_a_401(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    missing = assert_error(post(client, orders_event(), None), 401, "missing_api_key", "Authorization")
    assert "Bearer" in missing["message"]
    assert post(client, orders_event(), None).headers["WWW-Authenticate"].startswith("Bearer")
    assert_error(
        post(client, orders_event(), "olk_deadbeef_" + "A" * 43), 401, "invalid_api_key", "Authorization"
    )
    assert_error(post(client, orders_event(), "garbage"), 401, "invalid_api_key", "Authorization")
    key_id = db.scalar(select(ApiKey.id))
    assert key_id is not None
    revoke_api_key(db, org.id, key_id)
    db.commit()
    assert_error(post(client, orders_event(), key), 401, "revoked_api_key", "Authorization")
    assert row_counts(db) == [0, 0, 0, 0, 0]


def test_a_key_of_another_organization_than_the_one_named_is_a_403(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    make_org(db, "globex")
    response = post(client, orders_event(), key, **{"X-Organization": "globex"})
    body = assert_error(response, 403, "wrong_organization", "X-Organization")
    assert "'globex'" in body["message"]
    assert row_counts(db) == [0, 0, 0, 0, 0]
    assert post(client, orders_event(), key, **{"X-Organization": "acme"}).status_code == 201


def test_an_organizations_key_never_reaches_another_organizations_graph(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    globex = make_org(db, "globex")
    globex_key = make_key(db, globex)
    assert post(client, orders_event(time="2024-05-01T00:00:00Z"), globex_key).status_code == 201
    globex_before = graph_of(db, globex.id)

    # The same job and datasets, newer, from acme's key: acme gets its own copy, globex is untouched.
    newer = run_event(
        time="2024-06-01T00:00:00Z",
        inputs=[{"namespace": "postgres://db.internal:5432", "name": "shop.public.orders"}],
        outputs=[{"namespace": "postgres://db.internal:5432", "name": "acme.only"}],
    )
    assert post(client, newer, key).get_json()["lineage"] == "replaced"
    assert graph_of(db, globex.id) == globex_before
    acme = graph_of(db, org.id)
    assert [o["name"] for o in acme[0]["outputs"]] == ["acme.only"]
    assert (
        db.scalar(select(func.count()).select_from(LineageJob).where(LineageJob.organization_id == org.id))
        == 1
    )


def test_job_and_dataset_events_are_accepted(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    job_event = run_event(event_type=None, inputs=[{"namespace": "s3://raw", "name": "events/"}])
    del job_event["run"]
    assert post(client, job_event, key).get_json()["lineage"] == "replaced"
    dataset_event = {
        "eventTime": "2024-05-01T12:00:00Z",
        "producer": "https://example.com",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {
            "namespace": "s3://raw",
            "name": "events/",
            "facets": {"documentation": {"_producer": "p", "_schemaURL": "s", "description": "Raw events."}},
        },
    }
    response = post(client, dataset_event, key)
    assert response.get_json() == {
        "status": "accepted",
        "lineage": "not_carried",
        "jobFacetsUpdated": [],
        "datasetFacetsUpdated": 1,
    }
    assert graph_of(db, org.id)[0]["inputs"][0]["description"] == "Raw events."


def test_a_database_outage_is_a_503_the_client_retries(
    app: Flask, client: FlaskClient, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(*_args: Any, **_kwargs: Any) -> None:
        raise OperationalError("INSERT", {}, Exception("server closed the connection"))

    monkeypatch.setattr("portal.api.views.store_batch", unavailable)
    monkeypatch.setattr("lineage_core.lineage.group_commit.store_batch", unavailable)
    response = post(client, orders_event(), key)
    assert_error(response, 503, "database_unavailable", "body")
    assert response.headers["Retry-After"] == "5"


@pytest.mark.parametrize("outcome", ["stopped", "failed"])
def test_an_event_whose_group_store_stopped_or_failed_is_a_503_the_client_retries(
    client: FlaskClient, key: str, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    from lineage_core.lineage.group_commit import GROUP_COMMIT, GroupStoreFailedError, GroupStoreStoppedError

    def led_by_another(*_args: Any, **_kwargs: Any) -> None:
        # The request storing this event's group was in a worker that stopped, or met a database error.
        if outcome == "stopped":
            raise GroupStoreStoppedError
        cause = OperationalError("INSERT", {}, Exception("server closed the connection"))
        raise GroupStoreFailedError(cause) from cause

    monkeypatch.setattr(GROUP_COMMIT, "store", led_by_another)
    response = post(client, orders_event(), key)
    assert_error(response, 503, "database_unavailable", "body")
    assert response.headers["Retry-After"] == "5"


def test_the_api_needs_no_session_or_csrf_token(app: Flask, db: Session, org: Organization) -> None:
    assert app.config.get("WTF_CSRF_ENABLED", True)
    secret = make_key(db, org, "x")
    client = app.test_client()
    response = client.post(URL, json=orders_event(), headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 201
    assert "Set-Cookie" not in response.headers
