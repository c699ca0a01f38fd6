"""POST /api/v1/lineage/batch: per-event answers, limits, isolation of bad events, failures, concurrency."""

from __future__ import annotations

import dataclasses
import gzip
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg.errors
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import Scope, create_api_key, revoke_api_key
from lineage_core.infra.config import Settings
from lineage_core.infra.models import ApiKey, Organization
from lineage_core.lineage.ingest import store_event
from lineage_core.lineage.parse import check_event
from portal import create_app
from tests.db_refusals import refusing_jobs_named_poison
from tests.factories import (
    column_lineage,
    dataset,
    input_field,
    make_key,
    make_org,
    orders_event,
    run_event,
    schema,
    transformation,
)
from tests.readback import graph_of
from tests.test_ingest_api import TABLES, row_counts

URL = "/api/v1/lineage/batch"
NDJSON = "application/x-ndjson"


@pytest.fixture
def key(db: Session, org: Organization) -> str:
    return make_key(db, org)


def ndjson(events: list[Any]) -> bytes:
    return b"".join((e if isinstance(e, bytes) else orjson.dumps(e)) + b"\n" for e in events)


def post(
    client: FlaskClient, body: bytes, key: str | None, content_type: str = NDJSON, **headers: str
) -> Any:
    all_headers = {"Content-Type": content_type, **headers}
    if key is not None:
        all_headers["Authorization"] = f"Bearer {key}"
    return client.post(URL, data=body, headers=all_headers)


def assert_error(response: Any, status: int, error: str, field: str = "body") -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)[:1000]
    body = response.get_json()
    assert (body["error"], body["field"]) == (error, field)
    assert body["message"] and body["problems"][0]["field"] == field
    return body  # type: ignore[no-any-return]


def job_names(db: Session, org: Organization) -> list[str]:
    return [job["name"] for job in graph_of(db, org.id)]


def test_each_event_gets_its_answer_in_order_and_rejected_ones_store_nothing(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    events = [
        orders_event(),
        b"{not json",
        run_event(job="bad.run_id", run_id="42", inputs=[dataset("never.stored")]),
        run_event(job="second", inputs=[dataset("a")], outputs=[dataset("b")]),
        orders_event(),  # the same event again within the batch: a repeat
        orders_event(time="2024-04-01T00:00:00Z"),  # older than the first: stale
    ]
    # Blank lines (and a CRLF) are ignored; they are not events and get no answer.
    body = ndjson(events[:2]) + b"\n  \r\n" + ndjson(events[2:])
    response = post(client, body, key)
    assert response.status_code == 200, response.get_data(as_text=True)
    answer = response.get_json()
    assert (answer["status"], answer["accepted"], answer["rejected"]) == ("read", 4, 2)
    results = answer["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4, 5]
    assert results[0] == {
        "index": 0,
        "status": "accepted",
        "lineage": "replaced",
        "jobFacetsUpdated": ["documentation", "sql", "jobType"],
        "datasetFacetsUpdated": 4,
    }
    assert results[1]["status"] == "rejected"
    assert (results[1]["httpStatus"], results[1]["error"], results[1]["field"]) == (
        400,
        "malformed_json",
        "body",
    )
    assert (results[2]["httpStatus"], results[2]["error"], results[2]["field"]) == (
        400,
        "invalid_event",
        "run.runId",
    )
    assert results[2]["problems"][0]["code"] == "invalid_value" and results[2]["message"]
    assert results[3]["lineage"] == "replaced"
    assert results[4] == {**results[0], "index": 4, "lineage": "unchanged", "jobFacetsUpdated": []} | {
        "datasetFacetsUpdated": 0
    }
    assert results[5]["lineage"] == "stale"

    assert job_names(db, org) == ["etl.orders_daily", "second"]
    names = set(db.scalars(text("SELECT name FROM lineage_datasets")))
    db.rollback()
    assert "never.stored" not in names
    # The same answers as the single endpoint gives, one event after the other.
    assert db.scalar(select(ApiKey.last_used_at)) is not None


def test_a_json_array_is_a_batch_too(client: FlaskClient, db: Session, org: Organization, key: str) -> None:
    events = [
        run_event(job=f"job_{i}", inputs=[dataset("shared")], outputs=[dataset(f"out_{i}")]) for i in range(3)
    ]
    response = post(client, orjson.dumps(events), key, content_type="application/json")
    assert response.status_code == 200
    assert [r["lineage"] for r in response.get_json()["results"]] == ["replaced"] * 3
    assert job_names(db, org) == ["job_0", "job_1", "job_2"]


def test_the_batch_gives_the_graph_the_single_endpoint_gives(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    events = [
        orders_event(time="2024-05-02T00:00:00Z"),
        orders_event(event_type="START", time="2024-05-03T00:00:00Z", inputs=[], outputs=[]),
        orders_event(event_type="FAIL", time="2024-05-04T00:00:00Z", outputs=[dataset("shop.marts.orders")]),
        orders_event(time="2024-05-01T00:00:00Z"),
    ]
    single = make_org(db, "single")
    single_key = make_key(db, single)
    singles = [
        client.post("/api/v1/lineage", json=e, headers={"Authorization": f"Bearer {single_key}"}).get_json()
        for e in events
    ]
    batch = post(client, ndjson(events), key).get_json()["results"]
    assert [{k: v for k, v in r.items() if k != "index"} for r in batch] == singles
    assert graph_of(db, org.id) == graph_of(db, single.id)


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b'{"eventTime": "2024-05-01T00:00:00Z"}', "application/json", "JSON array"),
        (b"[1, 2", "application/json", "JSON array"),
        (b"\n \n", NDJSON, "no events"),
        (b"[]", "application/json", "no events"),
    ],
)
def test_a_body_that_is_not_a_batch_is_a_400(
    client: FlaskClient, db: Session, key: str, body: bytes, content_type: str, message: str
) -> None:
    response = post(client, body, key, content_type=content_type)
    assert message in assert_error(response, 400, "malformed_body")["message"]


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({"Content-Type": "text/plain"}, "Content-Type"),
        ({"Content-Type": ""}, "Content-Type"),
        ({"Content-Type": "application/jsonl"}, "Content-Type"),
        ({"Content-Encoding": "br"}, "Content-Encoding"),
    ],
)
def test_other_media_types_and_encodings_are_a_415(
    client: FlaskClient, key: str, headers: dict[str, str], field: str
) -> None:
    all_headers = {"Authorization": f"Bearer {key}", "Content-Type": NDJSON, **headers}
    response = client.post(URL, data=ndjson([orders_event()]), headers=all_headers)
    assert_error(response, 415, "unsupported_media_type", field)


@pytest.fixture
def small_limits(settings: Settings) -> FlaskClient:
    # Through the settings (the environment's LINEAGE_* variables), as an operator sets them.
    limited = dataclasses.replace(
        settings, lineage_batch_max_events=3, lineage_batch_max_bytes=20_000, lineage_max_event_bytes=5_000
    )
    return create_app(test_config={"TESTING": True}, settings=limited).test_client()


def test_more_events_than_allowed_is_a_413_and_nothing_is_stored(
    small_limits: FlaskClient, db: Session, key: str
) -> None:
    events = [run_event(job=f"j{i}") for i in range(4)]
    body = assert_error(post(small_limits, ndjson(events), key), 413, "too_many_events")
    assert "at most 3" in body["message"]
    array = post(small_limits, orjson.dumps(events), key, content_type="application/json")
    assert_error(array, 413, "too_many_events")
    assert row_counts(db) == [0] * len(TABLES)
    assert post(small_limits, ndjson(events[:3]), key).status_code == 200


def test_a_body_over_the_byte_limit_is_a_413_before_and_after_gzip(
    small_limits: FlaskClient, db: Session, key: str
) -> None:
    padded = run_event(job_facets={"documentation": {"description": "x" * 4_000}})
    too_long = ndjson([padded] * 3) + b" " * 10_000
    assert_error(post(small_limits, too_long, key), 413, "payload_too_large")
    # A gzip "bomb": 10 MB of newlines compress to ~10 KB; decompression stops one byte past the limit.
    bomb = gzip.compress(ndjson([run_event()]) + b"\n" * 10_000_000)
    assert len(bomb) < 20_000
    assert_error(post(small_limits, bomb, key, **{"Content-Encoding": "gzip"}), 413, "payload_too_large")
    assert_error(post(small_limits, b"not gzip", key, **{"Content-Encoding": "gzip"}), 400, "malformed_body")
    assert row_counts(db) == [0] * len(TABLES)
    ok = post(small_limits, gzip.compress(ndjson([run_event()])), key, **{"Content-Encoding": "gzip"})
    assert ok.status_code == 200 and ok.get_json()["accepted"] == 1


def test_an_event_over_its_own_limits_is_rejected_alone(
    small_limits: FlaskClient, client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    big = run_event(job="big", job_facets={"documentation": {"description": "x" * 6_000}})
    wide = run_event(job="wide", inputs=[dataset(f"t{i}") for i in range(5_001)])
    body = ndjson([run_event(job="before"), big, run_event(job="after")])
    results = post(small_limits, body, key).get_json()["results"]
    assert [r["status"] for r in results] == ["accepted", "rejected", "accepted"]
    assert (results[1]["httpStatus"], results[1]["error"]) == (413, "payload_too_large")
    assert job_names(db, org) == ["after", "before"]

    response = post(client, ndjson([wide, run_event(job="next")]), key)
    first, second = response.get_json()["results"]
    assert (first["httpStatus"], first["error"], first["field"]) == (413, "event_too_large", "inputs")
    assert second["status"] == "accepted"
    assert "wide" not in job_names(db, org)


@pytest.fixture
def poison_trigger(settings: Settings) -> Iterator[None]:
    """A real constraint of the database that the event checks do not know: no job may be called 'poison'."""
    with refusing_jobs_named_poison(settings.database_url):
        yield


def test_an_event_the_database_refuses_is_rejected_and_no_other_event_is_lost(
    client: FlaskClient, db: Session, org: Organization, key: str, poison_trigger: None
) -> None:
    shared = [dataset("shared", schema=schema(("id", "INT")))]
    events = [
        run_event(job="first", inputs=shared, outputs=[dataset("out_1")]),
        run_event(job="poison", inputs=shared, outputs=[dataset("out_p")]),
        run_event(job="third", inputs=shared, outputs=[dataset("out_3")]),
    ]
    response = post(client, ndjson(events), key)
    assert response.status_code == 200
    results = response.get_json()["results"]
    assert [r["status"] for r in results] == ["accepted", "rejected", "accepted"]
    assert (results[1]["httpStatus"], results[1]["error"]) == (400, "invalid_event")
    assert results[1]["problems"][0]["code"] == "rejected_by_database"
    assert "no poison jobs" in results[1]["message"]
    # The first event's answer does not change because the batch was stored again event by event.
    assert results[0]["datasetFacetsUpdated"] == 1 and results[2]["datasetFacetsUpdated"] == 0
    assert job_names(db, org) == ["first", "third"]
    assert "out_p" not in set(db.scalars(text("SELECT name FROM lineage_datasets")))
    db.rollback()

    single = client.post("/api/v1/lineage", json=events[1], headers={"Authorization": f"Bearer {key}"})
    body = assert_error(single, 400, "invalid_event")
    assert body["problems"][0]["code"] == "rejected_by_database"


def test_a_database_failure_mid_batch_is_a_503_and_stores_nothing(
    client: FlaskClient, db: Session, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lineage_core.lineage import batch_merge

    real = batch_merge._write_datasets

    def fail_after_the_jobs(*args: Any) -> None:
        real(*args)  # jobs, their datasets and lineage are written in this transaction by now
        raise OperationalError("UPDATE", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(batch_merge, "_write_datasets", fail_after_the_jobs)
    response = post(client, ndjson([orders_event(), run_event(job="other", inputs=[dataset("a")])]), key)
    assert_error(response, 503, "database_unavailable")
    assert response.headers["Retry-After"] == "5"
    assert row_counts(db) == [0] * len(TABLES)


def deadlock() -> OperationalError:
    return OperationalError("UPDATE", {}, psycopg.errors.DeadlockDetected("deadlock detected"))


def test_a_deadlock_is_retried_and_answers_as_if_it_never_happened(
    client: FlaskClient, db: Session, org: Organization, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lineage_core.lineage import batch_merge

    real = batch_merge._write_datasets
    failures = iter([deadlock()])

    def deadlocked_once(*args: Any) -> None:
        real(*args)  # everything of the first attempt is written by now, then PostgreSQL picks it
        if (error := next(failures, None)) is not None:
            raise error

    monkeypatch.setattr(batch_merge, "_write_datasets", deadlocked_once)
    events = [orders_event(), run_event(job="other", inputs=[dataset("a", schema=schema(("id", "INT")))])]
    response = post(client, ndjson(events), key)
    assert response.status_code == 200, response.get_data(as_text=True)
    results = response.get_json()["results"]
    # The answers of the attempt that committed, made after the first attempt was rolled back: not
    # "unchanged" as they would be if its writes had stayed.
    assert [(r["lineage"], r["datasetFacetsUpdated"]) for r in results] == [("replaced", 4), ("replaced", 1)]
    assert job_names(db, org) == ["etl.orders_daily", "other"]
    fresh = make_org(db, "fresh")
    for event in events:
        store_event(db, fresh.id, check_event(event))
    assert graph_of(db, org.id) == graph_of(db, fresh.id)


def test_a_database_failure_while_isolating_a_refused_event_is_a_503_and_stores_nothing(
    client: FlaskClient, db: Session, key: str, poison_trigger: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refused event sends the batch event by event (each in a savepoint); the database failing
    after some of them were written there leaves nothing of the batch."""
    from lineage_core.lineage import batch_merge

    real = batch_merge.apply_batch
    calls = 0

    def fails_on_the_third_event_alone(session: Session, organization_id: int, batch: Any) -> Any:
        nonlocal calls
        calls += 1
        results = real(session, organization_id, batch)
        if len(batch) == 1 and calls == 4:  # the whole batch, then the first two events alone
            raise OperationalError("UPDATE", {}, Exception("server closed the connection unexpectedly"))
        return results

    monkeypatch.setattr("lineage_core.lineage.ingest.apply_batch", fails_on_the_third_event_alone)
    events = [
        run_event(job="first", outputs=[dataset("out_1", schema=schema(("id", "INT")))]),
        run_event(job="poison", outputs=[dataset("out_p")]),
        run_event(job="third", outputs=[dataset("out_3")]),
    ]
    assert_error(post(client, ndjson(events), key), 503, "database_unavailable")
    assert calls == 4
    assert row_counts(db) == [0] * len(TABLES)


def test_a_deadlock_while_isolating_a_refused_event_is_retried(
    client: FlaskClient,
    db: Session,
    org: Organization,
    key: str,
    poison_trigger: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lineage_core.lineage import batch_merge

    real = batch_merge.apply_batch
    calls = 0

    def deadlocks_on_the_third_event_alone(session: Session, organization_id: int, batch: Any) -> Any:
        nonlocal calls
        calls += 1
        results = real(session, organization_id, batch)
        if calls == 4:
            raise deadlock()
        return results

    monkeypatch.setattr("lineage_core.lineage.ingest.apply_batch", deadlocks_on_the_third_event_alone)
    events = [
        run_event(job="first", outputs=[dataset("out_1", schema=schema(("id", "INT")))]),
        run_event(job="poison", outputs=[dataset("out_p")]),
        run_event(job="third", outputs=[dataset("out_3")]),
    ]
    response = post(client, ndjson(events), key)
    assert response.status_code == 200, response.get_data(as_text=True)
    results = response.get_json()["results"]
    assert [r["status"] for r in results] == ["accepted", "rejected", "accepted"]
    assert [results[0]["datasetFacetsUpdated"], results[2]["lineage"]] == [1, "replaced"]
    assert job_names(db, org) == ["first", "third"]


def test_keys_scopes_and_organizations(client: FlaskClient, db: Session, org: Organization, key: str) -> None:
    body = ndjson([orders_event()])
    assert_error(post(client, body, None), 401, "missing_api_key", "Authorization")
    assert_error(post(client, body, "olk_00000000_" + "A" * 43), 401, "invalid_api_key", "Authorization")
    globex = make_org(db, "globex")
    response = post(client, body, key, **{"X-Organization": "globex"})
    assert_error(response, 403, "wrong_organization", "X-Organization")

    reader = create_api_key(db, org.id, "reader", scopes=[Scope.CONNECTIONS_READ]).secret
    db.commit()
    for url in (URL, "/api/v1/lineage"):
        headers = {
            "Authorization": f"Bearer {reader}",
            "Content-Type": NDJSON if url == URL else "application/json",
        }
        response = client.post(url, data=body, headers=headers)
        assert (
            "lineage:write" in assert_error(response, 403, "insufficient_scope", "Authorization")["message"]
        )
    assert row_counts(db) == [0] * len(TABLES)

    assert post(client, body, key, **{"X-Organization": "acme"}).status_code == 200
    key_id = db.scalars(select(ApiKey.id).where(ApiKey.name == "producer")).one()
    revoke_api_key(db, org.id, key_id)
    db.commit()
    assert_error(post(client, body, key), 401, "revoked_api_key", "Authorization")
    assert graph_of(db, globex.id) == []


def test_an_organizations_batch_never_touches_another_organizations_graph(
    client: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    globex = make_org(db, "globex")
    globex_key = make_key(db, globex)
    post(client, ndjson([orders_event(time="2024-05-02T00:00:00Z")]), globex_key)
    before = graph_of(db, globex.id)
    # The same job and dataset names, newer: acme's graph changes, globex's does not.
    response = post(client, ndjson([orders_event(time="2024-05-03T00:00:00Z", outputs=[dataset("x")])]), key)
    assert response.get_json()["results"][0]["lineage"] == "replaced"
    assert graph_of(db, globex.id) == before
    assert graph_of(db, org.id)[0]["outputs"][0]["name"] == "x"
    assert db.scalar(select(func.count()).select_from(Organization)) == 2


def test_concurrent_batches_on_overlapping_datasets_all_land(
    app: Flask, db: Session, org: Organization, key: str
) -> None:
    """Six clients post batches whose jobs and datasets overlap, in different orders: every event is
    accepted (no deadlock reaches a client) and the graph is the one of the events one by one."""

    def event(thread: int, step: int) -> dict[str, Any]:
        minute = step * 6 + thread
        return run_event(
            job=f"job_{(thread + step) % 5}",
            time=f"2024-05-01T00:{minute // 60:02d}:{minute % 60:02d}Z",
            inputs=[
                dataset(f"shared_{(thread + k) % 7}", schema=schema(("id", "INT"), (f"c{k}", "TEXT")))
                for k in range(4)
            ],
            outputs=[
                dataset(
                    f"out_{(thread * step) % 5}",
                    schema=schema(("id", "INT"), (f"m{minute}", "TEXT")),
                    columnLineage=column_lineage(
                        {"id": [input_field(f"shared_{thread % 7}", "id", transformation())]}
                    ),
                )
            ],
        )

    batches = {
        thread: [[event(thread, step) for step in range(b * 5, b * 5 + 5)][::-1] for b in range(4)]
        for thread in range(6)
    }
    answers: list[Any] = []
    lock = threading.Lock()

    def worker(thread: int) -> None:
        client = app.test_client()
        for batch in batches[thread]:
            response = post(client, ndjson(batch), key)
            with lock:
                answers.append((response.status_code, response.get_json()))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(status == 200 and answer["accepted"] == 5 for status, answer in answers), answers
    assert len(answers) == 24

    reference = make_org(db, "reference")
    for thread_batches in batches.values():
        for batch in thread_batches:
            for item in batch:
                store_event(db, reference.id, check_event(item))
    assert graph_of(db, org.id) == graph_of(db, reference.id)


def test_a_gzip_body_of_several_members_is_read_to_its_end(
    client: FlaskClient, small_limits: FlaskClient, db: Session, org: Organization, key: str
) -> None:
    # `cat a.gz b.gz` is a valid gzip stream (gzip -d reads both): the events of the second member were
    # once dropped without a word, the batch answering for the first member's events only.
    gzip_header = {"Content-Encoding": "gzip"}
    first = gzip.compress(ndjson([run_event(job="first.a"), run_event(job="first.b")]))
    second = gzip.compress(ndjson([run_event(job="second.a")]))
    response = post(client, first + second, key, **gzip_header)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    assert [r["status"] for r in response.get_json()["results"]] == ["accepted"] * 3
    assert job_names(db, org) == ["first.a", "first.b", "second.a"]

    # Bytes after a member that are not another member are refused, not ignored.
    assert_error(post(client, first + b"trailing bytes", key, **gzip_header), 400, "malformed_body")
    # The byte limit counts every member: many small members cannot add up past it (20,000 here).
    member = gzip.compress(b"\n" * 15_000)
    assert_error(post(small_limits, member + member, key, **gzip_header), 413, "payload_too_large")
    assert job_names(db, org) == ["first.a", "first.b", "second.a"]


def test_a_worker_stores_at_most_its_concurrency_of_batches_and_refuses_one_that_waited_too_long(
    settings: Settings, db: Session, org: Organization, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import portal.api.views as views

    app = create_app(
        test_config={"TESTING": True},
        settings=dataclasses.replace(settings, lineage_batch_concurrency=1),
    )
    monkeypatch.setattr(views, "BATCH_SLOT_WAIT_SECONDS", 0.2)
    storing, release = threading.Event(), threading.Event()
    real_store = views.store_batch

    def slow_store(*args: Any, **kwargs: Any) -> Any:
        storing.set()
        assert release.wait(timeout=30)
        return real_store(*args, **kwargs)

    monkeypatch.setattr(views, "store_batch", slow_store)
    first: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: first.setdefault("response", post(app.test_client(), ndjson([orders_event()]), key))
    )
    thread.start()
    try:
        assert storing.wait(timeout=30)
        # The worker's one turn is taken: this batch waits for it, then is refused, nothing stored.
        body = assert_error(
            post(app.test_client(), ndjson([run_event("etl.later")]), key), 503, "server_busy"
        )
        assert "nothing of it was stored" in body["message"]
    finally:
        release.set()
        thread.join(timeout=30)
    assert first["response"].status_code == 200
    assert job_names(db, org) == ["etl.orders_daily"]

    # Turns come back after every outcome: a malformed batch, then a good one, each at once.
    monkeypatch.setattr(views, "store_batch", real_store)
    assert_error(post(app.test_client(), b"[1,", key, content_type="application/json"), 400, "malformed_body")
    response = post(app.test_client(), ndjson([run_event("etl.later")]), key)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers.get("Retry-After") is None
