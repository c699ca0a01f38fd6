"""What tests start from: rows (organizations, users, API keys, connectors, runs), lineage events, and
the customer's bucket and role in moto.

Every ``make_*`` adds its row and commits. Defaults give the ordinary case; any column can be overridden
where a test needs an odd row.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import boto3
import orjson
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import create_api_key
from lineage_core.accounts.organizations import create_organization
from lineage_core.accounts.users import create_user
from lineage_core.infra.models import (
    Connector,
    ConnectorStatus,
    ExportRun,
    Organization,
    Role,
    RunStatus,
    User,
    utcnow,
)
from lineage_core.lineage.importer import import_events
from lineage_core.setup.cloudformation import expected_policies
from lineage_core.setup.destination import new_external_id, role_arn
from lineage_core.setup.role_spec import RoleSpec
from tests.services import s3_client
from tests.web import PASSWORD

# Accounts ---------------------------------------------------------------------------------------------


def make_org(db: Session, slug: str, name: str | None = None) -> Organization:
    """An organization; its name is the slug in title case unless given."""
    organization = create_organization(db, slug, name or slug.title())
    db.commit()
    return organization


def make_user(
    db: Session,
    org: Organization | None,
    email: str,
    role: Role = Role.ORG_ADMIN,
    password: str = PASSWORD,
) -> User:
    """A user of ``org`` (an operator has none) who signs in with ``password``."""
    user = create_user(db, email, password, role, org)
    db.commit()
    return user


def make_key(db: Session, organization: Organization, name: str = "producer") -> str:
    """A new API key of the organization; returns its secret."""
    key = create_api_key(db, organization.id, name)
    db.commit()
    return key.secret


# Connectors and runs ----------------------------------------------------------------------------------

BUCKET = "acme-lineage"
PREFIX = "foundational/openlineage"
KEY = f"{PREFIX}/openlineage-events.jsonl"
ACCOUNT_ID = "210987654321"
ROLE_NAME = "FoundationalOpenLineageExport"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/{ROLE_NAME}"
PREVIOUS = b'{"previous":"snapshot"}\n' * 100  # an earlier export's object at KEY

# The settings of a saved connector; the role ARN is derived from them (see build_connector).
_COMPLETE_SETTINGS: dict[str, Any] = {
    "bucket": BUCKET,
    "prefix": PREFIX,
    "account_id": ACCOUNT_ID,
    "role_name": ROLE_NAME,
    "bucket_region": "us-east-1",
    "interval_days": 14,
}


def build_connector(
    org: Organization | None = None, *, status: ConnectorStatus = ConnectorStatus.ACTIVE, **overrides: Any
) -> Connector:
    """A connector not added to any session (see :func:`make_connector` for the states and defaults)."""
    values: dict[str, Any] = {"status": status, "external_id": new_external_id()}
    if org is not None:
        values["organization_id"] = org.id
    if status is not ConnectorStatus.DRAFT:
        values.update(_COMPLETE_SETTINGS, verified_at=utcnow() - timedelta(days=1))
    values.update(overrides)
    if status is not ConnectorStatus.DRAFT and "role_arn" not in overrides and values["role_name"]:
        values["role_arn"] = role_arn(
            "aws", values["account_id"], values.get("role_path", "/"), values["role_name"]
        )
    return Connector(**values)


def make_connector(
    db: Session,
    org: Organization,
    *,
    status: ConnectorStatus = ConnectorStatus.ACTIVE,
    runs: Iterable[RunStatus] = (),
    **overrides: Any,
) -> Connector:
    """A connector of ``org`` in one of its states, with runs of the ``runs`` statuses if given.

    - active (the default) and paused: as a passing Save leaves it: complete settings (BUCKET,
      PREFIX, role ROLE_NAME in account ACCOUNT_ID), the role ARN of those settings (ROLE_ARN by
      default), verified yesterday; not scheduled (``next_export_at`` unset);
    - draft: as "Start Setup" leaves it: nothing but its External ID.

    ``overrides`` set any column, e.g. ``next_export_at``, another bucket, or a draft's settings.
    """
    connector = build_connector(org, status=status, **overrides)
    connector.runs = [_run(status=run_status) for run_status in runs]
    db.add(connector)
    db.commit()
    return connector


def make_run(
    db: Session, connector: Connector, status: RunStatus = RunStatus.QUEUED, **overrides: Any
) -> ExportRun:
    """An export run of the connector, queued now by default; ``overrides`` set any other column."""
    run = _run(connector_id=connector.id, status=status, **overrides)
    db.add(run)
    db.commit()
    return run


def _run(**values: Any) -> ExportRun:
    return ExportRun(**{"trigger": "test", "queued_at": utcnow(), **values})


# Lineage events ---------------------------------------------------------------------------------------

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


def feature_events(jobs: int = 30, seed: int = 5) -> list[dict[str, Any]]:
    """A generated org plus hand-made jobs, so that every shape the export can write appears at least once.

    The synthetic generator gives documentation, SQL with dialect, jobType, typed and described fields,
    column lineage with DIRECT/INDIRECT subtypes, masking and explanations, and dataset-level
    dependencies. The hand-made jobs add: fields without a type and nested (struct) fields, input fields
    without transformations and with several, a job with no datasets, SQL without dialect, a jobType
    without jobType, a dataset without facets.
    """
    from lineage_core.demo.synthetic import iter_synthetic_events

    nested_schema = facet(
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
        orders_event(),
        run_event(
            job="etl.untyped",
            inputs=[dataset("shop.public.events", schema=nested_schema)],
            outputs=[
                dataset(
                    "shop.marts.cities",
                    schema=schema(("city", "TEXT")),
                    columnLineage=column_lineage(
                        {
                            "city": [
                                input_field("shop.public.events", "payload.city"),
                                input_field(
                                    "shop.public.events",
                                    "raw",
                                    transformation("DIRECT", "TRANSFORMATION", "Parsed from raw JSON."),
                                    transformation("INDIRECT", "FILTER"),
                                ),
                            ]
                        }
                    ),
                )
            ],
        ),
        run_event(
            job="docs.only",
            job_facets={"documentation": facet({"description": "A job that has not run yet."})},
        ),
        run_event(
            job="flink.orders_stream",
            namespace="flink-prod",
            inputs=[dataset("orders", namespace="kafka://broker.internal:9092")],
            outputs=[dataset("shop.public.orders_live")],
            job_facets={
                "sql": facet({"query": "INSERT INTO orders_live SELECT * FROM orders"}),
                "jobType": facet({"processingType": "STREAMING", "integration": "FLINK"}),
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
    body = b"".join(orjson.dumps(event) + b"\n" for event in events)
    report = import_events(session, organization_id, io.BytesIO(body))
    assert report.rejected == 0 and report.stored == len(events), report


# The customer's side in moto --------------------------------------------------------------------------


def create_bucket(endpoint: str, bucket: str = BUCKET) -> None:
    s3_client(endpoint).create_bucket(Bucket=bucket)


def create_role_through_iam(endpoint: str, spec: RoleSpec) -> str:
    """The role the template creates, made through the IAM API with the very same documents.

    Needed where moto's IAM enforcement is on: moto answers HTTP 500 to S3 calls signed with the
    credentials of a role that CloudFormation created, but enforces the same policy on an IAM-made one.
    """
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    documents = expected_policies(spec)
    role = iam.create_role(
        RoleName=spec.role_name,
        Path=spec.role_path,
        AssumeRolePolicyDocument=json.dumps(documents["trust_policy"]),
    )["Role"]
    for name, document in documents["inline_policies"].items():
        iam.put_role_policy(RoleName=spec.role_name, PolicyName=name, PolicyDocument=json.dumps(document))
    return str(role["Arn"])
