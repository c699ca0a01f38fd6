"""The real openlineage-python client (HTTP transport, API-key auth) posting to a real HTTP server."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from flask import Flask
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_dataset,
    job_type_job,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde
from openlineage.client.transport.http import HttpConfig, HttpTransport
from sqlalchemy.orm import Session
from werkzeug.serving import make_server

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Organization
from portal import create_app
from tests.factories import make_key, make_org
from tests.readback import graph_of

PG = "postgres://db.internal:5432"


@pytest.fixture
def server_url(settings: Settings) -> Iterator[str]:
    """The portal served over real HTTP on a free port, in a thread, for this test."""
    app: Flask = create_app(test_config={"LINEAGE_MAX_EVENT_BYTES": 200_000}, settings=settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)
        server.server_close()


def client_for(url: str, key: str, **config: Any) -> OpenLineageClient:
    transport = HttpTransport(
        HttpConfig.from_dict(
            {"url": url, "auth": {"type": "api_key", "apiKey": key}, "timeout": 10, **config}
        )
    )
    return OpenLineageClient(transport=transport)


def events(run_id: str) -> tuple[RunEvent, RunEvent]:
    job = Job(
        namespace="airflow-prod",
        name="orders_etl.build_mart",
        facets={
            "sql": sql_job.SQLJobFacet(
                query="INSERT INTO marts.orders SELECT id, amount FROM raw.orders", dialect="postgres"
            ),
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="AIRFLOW", jobType="TASK"
            ),
        },
    )
    start = RunEvent(
        eventType=RunState.START,
        eventTime=datetime(2024, 5, 1, 12, tzinfo=UTC).isoformat(),
        run=Run(runId=run_id),
        job=job,
    )
    lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "total": column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(
                        namespace=PG,
                        name="raw.orders",
                        field="amount",
                        transformations=[
                            column_lineage_dataset.Transformation(
                                type="DIRECT", subtype="AGGREGATION", description="SUM(amount)", masking=False
                            )
                        ],
                    )
                ]
            )
        }
    )
    complete = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime(2024, 5, 1, 12, 5, tzinfo=UTC).isoformat(),
        run=Run(runId=run_id),
        job=job,
        inputs=[
            InputDataset(
                namespace=PG,
                name="raw.orders",
                facets={
                    "schema": schema_dataset.SchemaDatasetFacet(
                        fields=[
                            schema_dataset.SchemaDatasetFacetFields(
                                name="id", type="BIGINT", description="Order id"
                            ),
                            schema_dataset.SchemaDatasetFacetFields(name="amount", type="NUMERIC"),
                        ]
                    )
                },
            )
        ],
        outputs=[
            OutputDataset(
                namespace=PG,
                name="marts.orders",
                facets={
                    "documentation": documentation_dataset.DocumentationDatasetFacet(
                        description="Order totals."
                    ),
                    "columnLineage": lineage,
                },
            )
        ],
    )
    return start, complete


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_the_openlineage_client_posts_a_run(
    server_url: str, db: Session, org: Organization, compression: str | None
) -> None:
    key = make_key(db, org)
    client = client_for(server_url, key, **({"compression": compression} if compression else {}))
    start, complete = events(str(uuid.uuid4()))
    client.emit(start)
    client.emit(complete)
    client.emit(start)  # a late START does not erase what the COMPLETE defined

    (job,) = graph_of(db, org.id)
    assert (job["namespace"], job["name"], job["sql_dialect"], job["integration"]) == (
        "airflow-prod",
        "orders_etl.build_mart",
        "postgres",
        "AIRFLOW",
    )
    assert [d["name"] for d in job["inputs"]] == ["raw.orders"]
    assert job["inputs"][0]["fields"][0] == {"name": "id", "type": "BIGINT", "description": "Order id"}
    output = job["outputs"][0]
    assert output["description"] == "Order totals."
    assert output["column_lineage"] == {
        "total": {
            "inputFields": [
                {
                    "namespace": PG,
                    "name": "raw.orders",
                    "field": "amount",
                    "transformations": [
                        {
                            "type": "DIRECT",
                            "subtype": "AGGREGATION",
                            "masking": False,
                            "description": "SUM(amount)",
                        }
                    ],
                }
            ]
        }
    }


def test_the_client_gets_a_401_for_a_key_of_nobody_and_nothing_is_stored(
    server_url: str, db: Session, org: Organization
) -> None:
    client = client_for(server_url, "olk_00000000_" + "A" * 43)
    with pytest.raises(requests.HTTPError) as caught:
        client.emit(events(str(uuid.uuid4()))[1])
    assert caught.value.response.status_code == 401
    assert caught.value.response.json()["error"] == "invalid_api_key"
    assert graph_of(db, org.id) == []


def test_one_organizations_client_never_writes_into_another(
    server_url: str, db: Session, org: Organization
) -> None:
    globex = make_org(db, "globex")
    client_for(server_url, make_key(db, globex)).emit(events(str(uuid.uuid4()))[1])
    assert graph_of(db, org.id) == []
    assert len(graph_of(db, globex.id)) == 1


def test_a_chunked_body_over_the_limit_is_cut_off_with_a_413(
    server_url: str, db: Session, org: Organization
) -> None:
    key = make_key(db, org)

    def body() -> Iterator[bytes]:  # no Content-Length: requests sends it chunked
        yield b'{"eventTime": "2024-05-01T12:00:00Z", "padding": "'
        for _ in range(300):
            yield b"x" * 1000
        yield b'"}'

    response = requests.post(
        f"{server_url}/api/v1/lineage",
        data=body(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 413
    assert response.json()["field"] == "body"
    ok = requests.post(
        f"{server_url}/api/v1/lineage",
        data=Serde.to_json(events(str(uuid.uuid4()))[1]),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=10,
    )
    assert ok.status_code == 201


def test_the_clients_events_as_a_batch_give_the_graph_the_client_gives_one_by_one(
    server_url: str, db: Session, org: Organization
) -> None:
    """openlineage-python 1.54 has no batch transport (its HTTP transports emit one event per request):
    its own serialization of the events, one per line, is what a producer batching them would post."""
    start, complete = events(str(uuid.uuid4()))
    client_for(server_url, make_key(db, org)).emit(start)
    client_for(server_url, make_key(db, org, "second")).emit(complete)

    batched = make_org(db, "batched")
    body = "\n".join(Serde.to_json(event) for event in (start, complete)).encode()
    response = requests.post(
        f"{server_url}/api/v1/lineage/batch",
        data=body,
        headers={"Authorization": f"Bearer {make_key(db, batched)}", "Content-Type": "application/x-ndjson"},
        timeout=10,
    )
    assert response.status_code == 200
    assert [r["lineage"] for r in response.json()["results"]] == ["not_carried", "replaced"]
    assert graph_of(db, batched.id) == graph_of(db, org.id) != []
