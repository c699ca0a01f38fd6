"""Tiny builders of OpenLineage events and a comparable view of an organization's stored graph."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import create_api_key
from lineage_core.accounts.organizations import create_organization
from lineage_core.infra.models import Organization
from lineage_core.lineage.graph import iter_org_graph

PRODUCER = "https://example.com/tests"
PG = "postgres://db.internal:5432"


def facet(body: dict[str, Any], name: str = "Facet") -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{name}.json",
        **body,
    }


def schema(*fields: tuple[str, str] | tuple[str, str, str]) -> dict[str, Any]:
    return facet(
        {
            "fields": [
                {"name": f[0], "type": f[1], **({"description": f[2]} if len(f) > 2 else {})} for f in fields
            ]
        },
        "SchemaDatasetFacet",
    )


def documentation(text: str) -> dict[str, Any]:
    return facet({"description": text}, "DocumentationDatasetFacet")


def transformation(
    type_: str = "DIRECT", subtype: str = "IDENTITY", description: str = "", masking: bool = False
) -> dict[str, Any]:
    return {"type": type_, "subtype": subtype, "description": description, "masking": masking}


def input_field(
    name: str, field: str, *transformations: dict[str, Any], namespace: str = PG
) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "field": field, "transformations": list(transformations)}


def column_lineage(
    fields: dict[str, list[dict[str, Any]]], dataset: list[dict[str, Any]] | None = None
) -> Any:
    body: dict[str, Any] = {"fields": {name: {"inputFields": inputs} for name, inputs in fields.items()}}
    if dataset is not None:
        body["dataset"] = dataset
    return facet(body, "ColumnLineageDatasetFacet")


def dataset(name: str, namespace: str = PG, **facets: dict[str, Any]) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "facets": facets}


def run_event(
    job: str = "etl.orders_daily",
    event_type: str | None = "COMPLETE",
    time: str = "2024-05-01T12:00:00Z",
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    job_facets: dict[str, Any] | None = None,
    run_id: str | None = None,
    namespace: str = "airflow-prod",
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventTime": time,
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id or str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": job, "facets": job_facets or {}},
        "inputs": inputs if inputs is not None else [],
        "outputs": outputs if outputs is not None else [],
    }
    if event_type is not None:
        event["eventType"] = event_type
    return event


def orders_event(time: str = "2024-05-01T12:00:00Z", event_type: str = "COMPLETE", **overrides: Any) -> Any:
    """A complete event: raw.orders + raw.customers → marts.orders, with schema, docs, column lineage, SQL."""
    defaults: dict[str, Any] = {
        "inputs": [
            dataset("shop.public.orders", schema=schema(("id", "BIGINT", "Order id"), ("amount", "NUMERIC"))),
            dataset("shop.public.customers", schema=schema(("id", "BIGINT"), ("email", "TEXT"))),
        ],
        "outputs": [
            dataset(
                "shop.marts.orders",
                schema=schema(
                    ("order_id", "BIGINT", "Order id"), ("total", "NUMERIC"), ("email_hash", "TEXT")
                ),
                documentation=documentation("Orders with customer e-mail hashes."),
                columnLineage=column_lineage(
                    {
                        "order_id": [input_field("shop.public.orders", "id", transformation())],
                        "total": [
                            input_field(
                                "shop.public.orders",
                                "amount",
                                transformation("DIRECT", "AGGREGATION", "SUM(amount) per order"),
                            )
                        ],
                        "email_hash": [
                            input_field(
                                "shop.public.customers",
                                "email",
                                transformation("DIRECT", "TRANSFORMATION", "sha256(email)", masking=True),
                            )
                        ],
                    },
                    dataset=[
                        input_field(
                            "shop.public.customers", "id", transformation("INDIRECT", "JOIN", "join on id")
                        )
                    ],
                ),
            )
        ],
        "job_facets": {
            "sql": facet({"query": "INSERT INTO shop.marts.orders SELECT ...", "dialect": "postgres"}),
            "documentation": facet({"description": "Daily orders mart."}),
            "jobType": facet({"processingType": "BATCH", "integration": "AIRFLOW", "jobType": "TASK"}),
        },
    }
    defaults.update(overrides)
    return run_event(time=time, event_type=event_type, **defaults)


def make_org(db: Session, slug: str) -> Organization:
    organization = create_organization(db, slug, slug.title())
    db.commit()
    return organization


def make_key(db: Session, organization: Organization, name: str = "producer") -> str:
    key = create_api_key(db, organization.id, name)
    db.commit()
    return key.secret


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
