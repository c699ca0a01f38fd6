"""The work one ingest request can cause is bounded (findings 3 and 4 of the abuse review).

Finding 3: a valid RunEvent of 140,000 distinct inputs held a worker for 27 s, and a rejected body of a
million ``{}`` inputs cost 4.3 s. The limits of ``lineage_core.lineage.limits`` are checked on the
decoded JSON before anything else: 413 ``event_too_large`` naming the limit, nothing stored, the store
never called. Finding 4: a chunked body was cut at 5 MiB and stored; it is now a 413 like the same body
with a Content-Length, also through gunicorn.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests
from flask.testing import FlaskClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Organization
from lineage_core.lineage.limits import DEFAULT_LIMITS
from lineage_core.lineage.models import LineageDataset, LineageJob
from portal.api.views import DEFAULT_MAX_EVENT_BYTES
from tests.browser import running_portal
from tests.factories import make_key, make_org, run_event
from tests.services import free_port, process_env

URL = "/api/v1/lineage"
LIMIT = DEFAULT_MAX_EVENT_BYTES


@pytest.fixture
def key(db: Session, org: Organization) -> str:
    return make_key(db, org)


def _headers(key: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}


def _stored(db: Session) -> tuple[int, int]:
    counts = (
        db.scalar(select(func.count()).select_from(LineageJob)) or 0,
        db.scalar(select(func.count()).select_from(LineageDataset)) or 0,
    )
    db.rollback()
    return counts


def _post_chunked(client: FlaskClient, key: str, body: bytes) -> Any:
    """As a chunked request reaches the app: no Content-Length, a stream the server terminates."""
    return client.post(
        URL,
        input_stream=io.BytesIO(body),
        headers=_headers(key),
        environ_overrides={"wsgi.input_terminated": True, "CONTENT_LENGTH": ""},
    )


def _padded(size: int) -> bytes:
    event = orjson.dumps(run_event(outputs=[{"namespace": "pg", "name": "t"}]))
    return event + b" " * (size - len(event))


# Finding 4: chunked bodies ------------------------------------------------------------------------------


def test_a_chunked_body_over_the_limit_is_refused_not_cut(client: FlaskClient, db: Session, key: str) -> None:
    body = _padded(LIMIT + 6_000_000)
    chunked = _post_chunked(client, key, body)
    assert chunked.status_code == 413, chunked.get_data(as_text=True)
    with_length = client.post(URL, data=body, headers=_headers(key))
    assert with_length.status_code == 413
    assert chunked.get_json() == with_length.get_json()
    assert chunked.get_json()["error"] == "payload_too_large"
    assert _stored(db) == (0, 0)


def test_a_chunked_body_of_exactly_the_limit_is_stored_and_one_byte_more_is_not(
    client: FlaskClient, db: Session, key: str
) -> None:
    assert _post_chunked(client, key, _padded(LIMIT + 1)).status_code == 413
    assert _stored(db) == (0, 0)
    assert _post_chunked(client, key, _padded(LIMIT)).status_code == 201
    assert _stored(db) == (1, 1)


@pytest.fixture(scope="module")
def gunicorn_url(base_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("gunicorn") / "portal.log"
    with running_portal(process_env(base_settings), free_port(), Path(log)) as server:
        server.wait_until_ready()
        yield server.base_url


def test_through_gunicorn_a_chunked_body_over_the_limit_is_a_413(
    gunicorn_url: str, settings: Settings, db: Session
) -> None:
    key = make_key(db, make_org(db, "chunky"))
    body = _padded(LIMIT + 6_000_000)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1 << 20):
            yield body[start : start + (1 << 20)]

    response = requests.post(f"{gunicorn_url}{URL}", data=chunks(), headers=_headers(key), timeout=60)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "payload_too_large"
    small = requests.post(
        f"{gunicorn_url}{URL}", data=iter([_padded(10_000)]), headers=_headers(key), timeout=60
    )
    assert small.status_code == 201, small.text
    assert _stored(db) == (1, 1)


# Finding 3: the work per event ----------------------------------------------------------------------------


def _fields(count: int) -> dict[str, Any]:
    return {"fields": [{"name": f"c{index}", "type": "STRING"} for index in range(count)]}


def _edges(outputs: int, per_output: int) -> dict[str, Any]:
    return {
        "fields": {
            f"o{index}": {
                "inputFields": [
                    {"namespace": "pg", "name": "src", "field": f"s{j}"} for j in range(per_output)
                ]
            }
            for index in range(outputs)
        }
    }


TOO_MUCH = [
    (
        "inputs",
        lambda: run_event(inputs=[{"namespace": "pg", "name": f"t{i}"} for i in range(5_001)]),
        "5,000",
    ),
    (
        "outputs",
        lambda: run_event(outputs=[{"namespace": "pg", "name": f"t{i}"} for i in range(1_001)]),
        "1,000",
    ),
    (
        "outputs[0].facets.schema.fields",
        lambda: run_event(
            outputs=[{"namespace": "pg", "name": "wide", "facets": {"schema": _fields(10_001)}}]
        ),
        "10,000",
    ),
    (
        "outputs[0].facets.schema.fields",
        lambda: run_event(
            outputs=[
                {
                    "namespace": "pg",
                    "name": "nested",
                    "facets": {"schema": {"fields": [{"name": "s", "type": "STRUCT", **_fields(10_000)}]}},
                }
            ]
        ),
        "10,000",
    ),
    (
        "outputs[10].facets.schema.fields",
        lambda: run_event(
            outputs=[
                {"namespace": "pg", "name": f"w{i}", "facets": {"schema": _fields(9_100)}} for i in range(11)
            ]
        ),
        "100,000",
    ),
    (
        "outputs[1].facets.columnLineage",
        lambda: run_event(
            outputs=[
                {"namespace": "pg", "name": f"o{i}", "facets": {"columnLineage": _edges(224, 224)}}
                for i in range(2)
            ]
        ),
        "100,000",
    ),
]


@pytest.mark.parametrize(("field", "make", "limit"), TOO_MUCH, ids=[f"{t[0]}-{t[2]}" for t in TOO_MUCH])
def test_events_over_a_limit_are_a_413_naming_it_before_any_store_work(
    client: FlaskClient,
    db: Session,
    key: str,
    monkeypatch: pytest.MonkeyPatch,
    field: str,
    make: Any,
    limit: str,
) -> None:
    def never(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the store was called for an event over a limit")

    monkeypatch.setattr("portal.api.views.store_batch", never)
    monkeypatch.setattr("lineage_core.lineage.group_commit.store_batch", never)  # the single endpoint's
    response = client.post(URL, data=orjson.dumps(make()), headers=_headers(key))
    assert response.status_code == 413, response.get_data(as_text=True)[:500]
    body = response.get_json()
    assert (body["error"], body["field"]) == ("event_too_large", field)
    assert limit in body["message"] and body["problems"][0]["code"] == "too_many_items"


def test_a_million_empty_inputs_is_refused_before_any_input_is_checked(
    client: FlaskClient, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "At once" means the count is refused before either validator walks a single input (a walk of a
    # million items is what made such a body expensive); checked by refusing any walk, not by a clock.
    def never(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("an input was validated before the limit refused the event")

    monkeypatch.setattr("lineage_core.lineage.parse.read_valid_event", never)
    monkeypatch.setattr("lineage_core.lineage.parse._Checker.event", never)
    body = b'{"eventType":"COMPLETE","inputs":[' + b",".join([b"{}"] * 1_000_000) + b"]}"
    response = client.post(URL, data=body, headers=_headers(key))
    assert response.status_code == 413
    assert response.get_json()["field"] == "inputs"


def test_events_at_the_limits_are_stored(client: FlaskClient, db: Session, key: str) -> None:
    at_limits = run_event(
        inputs=[{"namespace": "pg", "name": f"t{i}"} for i in range(DEFAULT_LIMITS.inputs)],
        outputs=[
            {
                "namespace": "pg",
                "name": "wide",
                "facets": {
                    "schema": _fields(DEFAULT_LIMITS.fields_per_schema),
                    "columnLineage": _edges(100, 100),
                },
            }
        ],
    )
    response = client.post(URL, data=orjson.dumps(at_limits), headers=_headers(key))
    assert response.status_code == 201, response.get_data(as_text=True)[:500]
    assert _stored(db) == (1, DEFAULT_LIMITS.inputs + 2)  # the inputs, "wide" and the lineage's "src"
