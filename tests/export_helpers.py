"""Helpers shared by the export tests (not collected: the file name does not start with ``test_``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from botocore.awsrequest import AWSResponse
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, Organization, RunStatus, utcnow
from lineage_core.setup.destination import new_external_id
from tests.conftest import s3_client


class _RawBody:
    """The one method botocore reads a response body through."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self._data


def fail_upload_part(
    s3: Any,
    part_number: int,
    *,
    code: str = "AccessDenied",
    message: str = "Access Denied",
    status: int = 403,
) -> list[int]:
    """Make ``s3``'s UploadPart of part ``part_number`` receive S3's error response instead of moto's.

    moto cannot be told to fail one particular request, so the failing response is injected at
    ``before-send``: every other request (CreateMultipartUpload, the other parts, AbortMultipartUpload,
    ListMultipartUploads) still goes to the moto server, and botocore parses the injected response
    exactly as it would parse S3's (same XML error shape, same retry rules; 403 is not retried).

    Returns a list that records the part numbers sent through this client, in order.
    """
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>"
    ).encode()
    sent: list[int] = []

    def before_send(request: Any, **_kwargs: Any) -> AWSResponse | None:
        number = int(parse_qs(urlsplit(request.url).query)["partNumber"][0])
        sent.append(number)
        if number == part_number:
            return AWSResponse(request.url, status, {"Content-Type": "application/xml"}, _RawBody(body))
        return None

    s3.meta.events.register("before-send.s3.UploadPart", before_send)
    return sent


def pending_uploads(s3: Any, bucket: str) -> list[dict[str, Any]]:
    """The multipart uploads S3 still holds for the bucket (started, neither completed nor aborted)."""
    return list(s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


# Loading events with openlineage-python's classes --------------------------------------------------------
#
# openlineage-python has no "from dict" loader, so each key is mapped onto its class by hand, refusing any
# key it does not know: an event that loads uses nothing the official classes do not model, and their
# validators (runId as UUID, eventTime as ISO 8601, URIs) have run. Dumping the loaded event with the
# library's Serde must then give the original back, including every facet's _schemaURL, which the classes
# set themselves from the spec version they were generated from.


def load_with_openlineage_classes(event: dict[str, Any]) -> Any:
    """``event`` as an ``openlineage.client.event_v2.RunEvent``; raises if anything does not map.

    Also asserts that ``Serde.to_dict`` of the loaded event equals ``event`` (ignoring the empty lists
    and dicts that the classes add as defaults for keys the event leaves out).
    """
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.serde import Serde

    _keys(
        event, "event", {"eventType", "eventTime", "producer", "schemaURL", "run", "job", "inputs", "outputs"}
    )
    _keys(event["run"], "run", {"runId", "facets"})
    assert event["run"].get("facets", {}) == {}, "run facets are not exported"
    _keys(event["job"], "job", {"namespace", "name", "facets"})
    loaded = RunEvent(
        eventType=RunState(event["eventType"]),
        eventTime=event["eventTime"],
        producer=event["producer"],
        run=Run(runId=event["run"]["runId"], facets={}),
        job=Job(
            namespace=event["job"]["namespace"],
            name=event["job"]["name"],
            facets={k: _job_facet(k, v) for k, v in event["job"].get("facets", {}).items()},
        ),
        inputs=[
            InputDataset(namespace=d["namespace"], name=d["name"], facets=_dataset_facets(d, "input"))
            for d in event["inputs"]
        ],
        outputs=[
            OutputDataset(namespace=d["namespace"], name=d["name"], facets=_dataset_facets(d, "output"))
            for d in event["outputs"]
        ],
    )
    assert loaded.schemaURL == event["schemaURL"]
    _assert_same(Serde.to_dict(loaded), event, "event")
    return loaded


def _keys(obj: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = set(obj) - allowed
    assert not unknown, f"{where}: keys the openlineage-python classes do not model: {sorted(unknown)}"


def _job_facet(name: str, facet: dict[str, Any]) -> Any:
    from openlineage.client.facet_v2 import documentation_job, job_type_job, sql_job

    body = {k: v for k, v in facet.items() if k not in ("_producer", "_schemaURL")}
    classes = {
        "documentation": documentation_job.DocumentationJobFacet,
        "sql": sql_job.SQLJobFacet,
        "jobType": job_type_job.JobTypeJobFacet,
    }
    assert name in classes, f"job facet {name!r} is not one the export writes"
    return classes[name](producer=facet["_producer"], **body)


def _dataset_facets(dataset: dict[str, Any], side: str) -> dict[str, Any]:
    from openlineage.client.facet_v2 import column_lineage_dataset as cl
    from openlineage.client.facet_v2 import documentation_dataset, schema_dataset

    _keys(dataset, side, {"namespace", "name", "facets"})
    out: dict[str, Any] = {}
    for name, facet in dataset.get("facets", {}).items():
        producer = facet["_producer"]
        if name == "schema":
            _keys(facet, "schema", {"_producer", "_schemaURL", "fields"})
            fields = []
            for f in facet["fields"]:
                _keys(f, "schema field", {"name", "type", "description"})
                fields.append(schema_dataset.SchemaDatasetFacetFields(**f))
            out[name] = schema_dataset.SchemaDatasetFacet(producer=producer, fields=fields)
        elif name == "documentation":
            _keys(facet, "documentation", {"_producer", "_schemaURL", "description"})
            out[name] = documentation_dataset.DocumentationDatasetFacet(
                producer=producer, description=facet["description"]
            )
        elif name == "columnLineage" and side == "output":
            _keys(facet, "columnLineage", {"_producer", "_schemaURL", "fields", "dataset"})

            def input_field(f: dict[str, Any]) -> Any:
                _keys(f, "inputField", {"namespace", "name", "field", "transformations"})
                transformations = []
                for t in f.get("transformations", []):
                    _keys(t, "transformation", {"type", "subtype", "description", "masking"})
                    transformations.append(cl.Transformation(**t))
                return cl.InputField(
                    namespace=f["namespace"],
                    name=f["name"],
                    field=f["field"],
                    transformations=transformations,
                )

            out[name] = cl.ColumnLineageDatasetFacet(
                producer=producer,
                fields={
                    column: cl.Fields(inputFields=[input_field(f) for f in spec["inputFields"]])
                    for column, spec in facet["fields"].items()
                },
                dataset=[input_field(f) for f in facet.get("dataset", [])],
            )
        else:
            raise AssertionError(f"{side} dataset facet {name!r} is not one the export writes")
    return out


def _assert_same(dumped: Any, original: Any, path: str) -> None:
    if isinstance(original, dict):
        assert isinstance(dumped, dict), path
        for key, value in dumped.items():
            if key not in original:
                assert value in ([], {}), f"{path}.{key}: the classes added {value!r}"
        for key, value in original.items():
            assert key in dumped, f"{path}.{key}: lost by the classes"
            _assert_same(dumped[key], value, f"{path}.{key}")
    elif isinstance(original, list):
        assert isinstance(dumped, list) and len(dumped) == len(original), path
        for index, (a, b) in enumerate(zip(dumped, original, strict=True)):
            _assert_same(a, b, f"{path}[{index}]")
    else:
        assert dumped == original, f"{path}: {dumped!r} != {original!r}"


# Organizations to export ---------------------------------------------------------------------------------


def feature_events(jobs: int = 30, seed: int = 5) -> list[dict[str, Any]]:
    """A generated org plus hand-made jobs, so that every shape the export can write appears at least once.

    The synthetic generator gives documentation, SQL with dialect, jobType, typed and described fields,
    column lineage with DIRECT/INDIRECT subtypes, masking and explanations, and dataset-level
    dependencies. The hand-made jobs add: fields without a type and nested (struct) fields, input fields
    without transformations and with several, a job with no datasets, SQL without dialect, a jobType
    without jobType, a dataset without facets.
    """
    from lineage_core.demo.synthetic import iter_synthetic_events
    from tests import lineage_factories as f

    nested_schema = f.facet(
        {
            "fields": [
                {"name": "payload", "fields": [{"name": "city", "type": "STRING", "description": "City."}]},
                {"name": "raw"},
            ]
        },
        "SchemaDatasetFacet",
    )
    return [
        *iter_synthetic_events(jobs, seed),
        f.orders_event(),
        f.run_event(
            job="etl.untyped",
            inputs=[f.dataset("shop.public.events", schema=nested_schema)],
            outputs=[
                f.dataset(
                    "shop.marts.cities",
                    schema=f.schema(("city", "TEXT")),
                    columnLineage=f.column_lineage(
                        {
                            "city": [
                                f.input_field("shop.public.events", "payload.city"),
                                f.input_field(
                                    "shop.public.events",
                                    "raw",
                                    f.transformation("DIRECT", "TRANSFORMATION", "Parsed from raw JSON."),
                                    f.transformation("INDIRECT", "FILTER"),
                                ),
                            ]
                        }
                    ),
                )
            ],
        ),
        f.run_event(
            job="docs.only",
            job_facets={"documentation": f.facet({"description": "A job that has not run yet."})},
        ),
        f.run_event(
            job="flink.orders_stream",
            namespace="flink-prod",
            inputs=[f.dataset("orders", namespace="kafka://broker.internal:9092")],
            outputs=[f.dataset("shop.public.orders_live")],
            job_facets={
                "sql": f.facet({"query": "INSERT INTO orders_live SELECT * FROM orders"}),
                "jobType": f.facet({"processingType": "STREAMING", "integration": "FLINK"}),
            },
        ),
    ]


def padded_events(jobs: int, sql_bytes: int, seed: int = 11) -> list[dict[str, Any]]:
    """Synthetic events whose SQL is padded to about ``sql_bytes``: a few of them make a multipart export."""
    from lineage_core.demo.synthetic import iter_synthetic_events

    events = list(iter_synthetic_events(jobs, seed))
    for index, event in enumerate(events):
        sql = event["job"]["facets"]["sql"]
        sql["query"] += f"\n-- {index:06d} " + "padding " * (sql_bytes // 8)
    return events


def store_events(session: Any, organization_id: int, events: list[dict[str, Any]]) -> None:
    """Store ``events`` through the lineage importer, as a file of them would be."""
    import io

    import orjson

    from lineage_core.lineage.importer import import_events

    body = b"".join(orjson.dumps(event) + b"\n" for event in events)
    report = import_events(session, organization_id, io.BytesIO(body))
    assert report.rejected == 0 and report.stored == len(events), report


# A moto front that can hold a request ---------------------------------------------------------------------


class GatedMotoServer:
    """A second HTTP front on this process's moto backends that holds the requests ``hold`` selects.

    moto keeps its state in module globals, so this server and the suite's moto server share every
    bucket and upload. A held request waits until :meth:`open` (or ``close``): the process that sent it
    is then known to be in the middle of that request, which makes "kill the worker mid-upload" a
    deterministic state instead of a race against the clock.
    """

    def __init__(self, hold: Any) -> None:
        import threading

        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        from tests.services import free_port

        self.reached = threading.Event()
        self._open = threading.Event()
        backend = DomainDispatcherApplication(create_backend_app)

        def gated(environ: dict[str, Any], start_response: Any) -> Any:
            if hold(environ):
                self.reached.set()
                self._open.wait(timeout=300)
            return backend(environ, start_response)

        port = free_port()
        self._server = make_server(
            "127.0.0.1", port, gated, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{port}"

    def open(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.open()
        self._server.shutdown()
        self._thread.join(timeout=30)


def is_upload_part(number: int) -> Any:
    """A ``hold`` predicate for :class:`GatedMotoServer`: the UploadPart request of part ``number``."""

    def hold(environ: dict[str, Any]) -> bool:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        return environ["REQUEST_METHOD"] == "PUT" and query.get("partNumber") == [str(number)]

    return hold


# Connectors and runs for export tests.

BUCKET = "acme-lineage"
PREFIX = "foundational/openlineage"
KEY = f"{PREFIX}/openlineage-events.jsonl"
ROLE_ARN = "arn:aws:iam::210987654321:role/FoundationalOpenLineageExport"
PREVIOUS = b'{"previous":"snapshot"}\n' * 100


@pytest.fixture
def s3(aws: str) -> Any:
    client = s3_client(aws)
    client.create_bucket(Bucket=BUCKET)
    return client


def make_connector(db: Session, org: Organization, **fields: Any) -> Connector:
    values: dict[str, Any] = {
        "organization_id": org.id,
        "status": ConnectorStatus.ACTIVE,
        "external_id": new_external_id(),
        "bucket": BUCKET,
        "prefix": PREFIX,
        "account_id": "210987654321",
        "role_name": "FoundationalOpenLineageExport",
        "role_arn": ROLE_ARN,
        "bucket_region": "us-east-1",
        "verified_at": utcnow() - timedelta(days=1),
        "interval_days": 14,
    }
    values.update(fields)
    connector = Connector(**values)
    db.add(connector)
    db.commit()
    return connector


def queued_run(db: Session, connector: Connector) -> int:
    run = ExportRun(connector_id=connector.id, status=RunStatus.QUEUED, trigger="test", queued_at=utcnow())
    db.add(run)
    db.commit()
    return run.id


def run_of(db: Session, run_id: int) -> ExportRun:
    db.expire_all()
    run = db.get(ExportRun, run_id)
    assert run is not None
    return run


def body(s3: Any, key: str = KEY) -> bytes:
    return bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
