"""Reading back what the product stored or wrote, in a form tests compare: an organization's lineage
graph, an export run's row, the exported object, and an exported event loaded with openlineage-python.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from lineage_core.infra.models import ExportRun
from lineage_core.lineage.graph import iter_org_graph
from tests.factories import BUCKET, KEY


def graph_of(db: Session, organization_id: int) -> list[dict[str, Any]]:
    """The organization's graph as plain data, without store ids, for equality checks."""
    jobs = []
    for job in iter_org_graph(db, organization_id):
        data = _plain(asdict(job))
        data.pop("id")
        jobs.append(data)
    db.rollback()
    return sorted(jobs, key=lambda j: (j["namespace"], j["name"]))


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively, so stored graphs compare with literal JSON-like expectations."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def run_of(db: Session, run_id: int) -> ExportRun:
    """The run as the database holds it now."""
    db.expire_all()
    run = db.get(ExportRun, run_id)
    assert run is not None
    return run


def body(s3: Any, key: str = KEY) -> bytes:
    """The object an export wrote to the connector's bucket (KEY by default)."""
    return bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


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
