"""The ingest path on SQLite, the embedded default: API, merge rules, rejection, reading."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Organization
from lineage_core.lineage.models import LineageDataset, LineageJob
from portal import create_app
from tests.factories import dataset, make_key, make_org, orders_event, run_event
from tests.readback import graph_of


@pytest.fixture
def sqlite_db(sqlite_settings: Settings) -> Iterator[Session]:
    session = session_factory(sqlite_settings.database_url)()
    yield session
    session.close()


@pytest.fixture
def sqlite_client(sqlite_settings: Settings) -> FlaskClient:
    return create_app(test_config={"TESTING": True}, settings=sqlite_settings).test_client()


def post(client: FlaskClient, event: object, key: str) -> tuple[int, dict[str, object]]:
    response = client.post(
        "/api/v1/lineage",
        data=orjson.dumps(event),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    return response.status_code, response.get_json()


def test_ingest_on_sqlite(sqlite_client: FlaskClient, sqlite_db: Session) -> None:
    org: Organization = make_org(sqlite_db, "acme")
    key = make_key(sqlite_db, org)

    assert post(sqlite_client, orders_event(time="2024-05-02T00:00:00Z"), key) == (
        201,
        {
            "status": "accepted",
            "lineage": "replaced",
            "jobFacetsUpdated": ["documentation", "sql", "jobType"],
            "datasetFacetsUpdated": 4,
        },
    )
    before = graph_of(sqlite_db, org.id)
    assert post(sqlite_client, orders_event(time="2024-05-02T00:00:00Z"), key)[1]["lineage"] == "unchanged"
    older = run_event(time="2024-05-01T00:00:00Z", inputs=[dataset("a")], outputs=[dataset("b")])
    assert post(sqlite_client, older, key)[1]["lineage"] == "stale"
    assert post(sqlite_client, run_event(event_type="START", time="2024-05-03T00:00:00Z"), key)[0] == 201
    assert graph_of(sqlite_db, org.id) == before

    bad = orders_event(job="other.job")
    bad["run"]["runId"] = "nope"
    status, body = post(sqlite_client, bad, key)
    assert (status, body["field"]) == (400, "run.runId")
    assert sqlite_db.scalar(select(func.count()).select_from(LineageJob)) == 1
    assert sqlite_db.scalar(select(func.count()).select_from(LineageDataset)) == 3

    newer = run_event(time="2024-05-04T00:00:00Z", inputs=[dataset("a")], outputs=[dataset("b")])
    assert post(sqlite_client, newer, key)[1]["lineage"] == "replaced"
    (job,) = graph_of(sqlite_db, org.id)
    assert ([d["name"] for d in job["inputs"]], [d["name"] for d in job["outputs"]]) == (["a"], ["b"])
    assert job["sql_dialect"] == "postgres"


def test_the_batch_endpoint_on_sqlite(sqlite_client: FlaskClient, sqlite_db: Session) -> None:
    """SQLite stores a batch event by event (one transaction each): the same answers, the same graph."""
    org: Organization = make_org(sqlite_db, "acme")
    key = make_key(sqlite_db, org)
    events = [
        orders_event(time="2024-05-02T00:00:00Z"),
        {"eventTime": "yesterday"},
        orders_event(time="2024-05-01T00:00:00Z"),
    ]
    response = sqlite_client.post(
        "/api/v1/lineage/batch",
        data=b"\n".join(orjson.dumps(e) for e in events),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 200
    answer = response.get_json()
    assert (answer["accepted"], answer["rejected"]) == (2, 1)
    assert [r.get("lineage", r.get("error")) for r in answer["results"]] == [
        "replaced",
        "invalid_event",
        "stale",
    ]
    (job,) = graph_of(sqlite_db, org.id)
    assert job["lineage_event_time"].isoformat() == "2024-05-02T00:00:00+00:00"
