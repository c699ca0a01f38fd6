"""Realistic synthetic lineage: OpenLineage events for an organization of a given size.

:func:`iter_synthetic_events` yields one COMPLETE RunEvent per job, as plain dicts ready for
``orjson.dumps``. The same ``(jobs, seed)`` always gives the same events (eventTimes and runIds included),
so generating twice into one organization changes nothing the second time.

What the graph looks like, so demos, tests and benchmarks exercise what real producers send:

* sources in operational stores: ``postgres://orders-db.internal:5432`` tables and ``s3://acme-raw-events``
  files; staging and marts in ``snowflake://acme-analytics``; reporting tables in ``bigquery``
  (names follow the spec's naming conventions);
* jobs in three stages, Airflow ingestion tasks, dbt models and Spark jobs, each reading one to three
  datasets, preferring recent outputs, so chains run many hops deep;
* every dataset with typed, described fields; every job with SQL in its warehouse's dialect, a jobType
  and a description; column lineage with DIRECT (IDENTITY, TRANSFORMATION, AGGREGATION, some masking)
  and dataset-level INDIRECT (JOIN, FILTER, GROUP_BY, SORT) dependencies, each with an explanation.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

PRODUCER = "https://github.com/foundational/openlineage-s3-export/synthetic"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_FACETS = "https://openlineage.io/spec/facets"
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)

_POSTGRES = "postgres://orders-db.internal:5432"
_S3 = "s3://acme-raw-events"
_SNOWFLAKE = "snowflake://acme-analytics"
_BIGQUERY = "bigquery"

# (name, generic type, description); generic types are rendered per warehouse below.
_COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    "orders": [
        ("order_id", "id", "Unique identifier of the order."),
        ("customer_id", "id", "The customer who placed the order."),
        ("order_status", "text", "Lifecycle state: placed, paid, shipped, delivered or cancelled."),
        ("order_total", "money", "Order amount including tax, in the order currency."),
        ("currency", "code", "ISO 4217 currency code of the order."),
        ("placed_at", "timestamp", "When the customer placed the order (UTC)."),
        ("shipping_country", "code", "ISO 3166 country the order ships to."),
        ("discount_code", "text", "Promotion code applied at checkout, if any."),
    ],
    "customers": [
        ("customer_id", "id", "Unique identifier of the customer."),
        ("email", "text", "Customer e-mail address (PII)."),
        ("full_name", "text", "Customer name as entered at sign-up (PII)."),
        ("signup_at", "timestamp", "When the customer account was created (UTC)."),
        ("country", "code", "Country of the billing address."),
        ("segment", "text", "Marketing segment: consumer, smb or enterprise."),
        ("is_active", "bool", "Whether the account is active."),
    ],
    "payments": [
        ("payment_id", "id", "Unique identifier of the payment."),
        ("order_id", "id", "The order this payment settles."),
        ("amount", "money", "Amount captured, in the payment currency."),
        ("payment_method", "text", "card, paypal, bank_transfer or gift_card."),
        ("captured_at", "timestamp", "When the payment was captured (UTC)."),
        ("card_last4", "text", "Last four digits of the card (PCI scope)."),
        ("status", "text", "authorized, captured, refunded or failed."),
    ],
    "products": [
        ("product_id", "id", "Unique identifier of the product."),
        ("sku", "text", "Stock keeping unit."),
        ("product_name", "text", "Display name of the product."),
        ("category", "text", "Top-level merchandising category."),
        ("list_price", "money", "Current list price in USD."),
        ("created_at", "timestamp", "When the product was first listed (UTC)."),
    ],
    "sessions": [
        ("session_id", "id", "Unique identifier of the web session."),
        ("customer_id", "id", "Signed-in customer, if any."),
        ("started_at", "timestamp", "First event of the session (UTC)."),
        ("page_views", "int", "Number of pages viewed in the session."),
        ("device_type", "text", "desktop, mobile or tablet."),
        ("utm_campaign", "text", "Marketing campaign from the landing URL."),
        ("ip_address", "text", "Client IP address (PII)."),
    ],
    "shipments": [
        ("shipment_id", "id", "Unique identifier of the shipment."),
        ("order_id", "id", "The order shipped."),
        ("carrier", "text", "Carrier name."),
        ("shipped_at", "timestamp", "When the parcel left the warehouse (UTC)."),
        ("delivered_at", "timestamp", "When the carrier reported delivery (UTC)."),
        ("weight_kg", "decimal", "Parcel weight in kilograms."),
    ],
}
_TYPES = {
    "postgres": {
        "id": "BIGINT",
        "text": "TEXT",
        "money": "NUMERIC(12,2)",
        "code": "CHAR(3)",
        "timestamp": "TIMESTAMPTZ",
        "bool": "BOOLEAN",
        "int": "INTEGER",
        "decimal": "NUMERIC(10,3)",
        "date": "DATE",
        "hash": "TEXT",
    },
    "s3": {
        "id": "int64",
        "text": "string",
        "money": "decimal(12,2)",
        "code": "string",
        "timestamp": "timestamp[us]",
        "bool": "bool",
        "int": "int32",
        "decimal": "decimal(10,3)",
        "date": "date32",
        "hash": "string",
    },
    "snowflake": {
        "id": "NUMBER(38,0)",
        "text": "VARCHAR",
        "money": "NUMBER(12,2)",
        "code": "VARCHAR(3)",
        "timestamp": "TIMESTAMP_TZ",
        "bool": "BOOLEAN",
        "int": "NUMBER(9,0)",
        "decimal": "NUMBER(10,3)",
        "date": "DATE",
        "hash": "VARCHAR(64)",
    },
    "bigquery": {
        "id": "INT64",
        "text": "STRING",
        "money": "NUMERIC",
        "code": "STRING",
        "timestamp": "TIMESTAMP",
        "bool": "BOOL",
        "int": "INT64",
        "decimal": "NUMERIC",
        "date": "DATE",
        "hash": "STRING",
    },
}
_MAX_COLUMNS = 40
_PII = {"email", "full_name", "ip_address", "card_last4"}
_GROUP_KEYS = ("customer_id", "order_id", "product_id", "country", "shipping_country", "segment", "category")


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    generic: str
    description: str


@dataclass(frozen=True, slots=True)
class _Table:
    namespace: str
    name: str
    warehouse: str  # key of _TYPES
    domain: str
    description: str
    columns: tuple[_Column, ...]
    stage: int


@dataclass(frozen=True, slots=True)
class _Derived:
    """One output column: its expression, its inputs (alias, column) and the transformation."""

    column: _Column
    expression: str
    sources: tuple[tuple[int, str], ...]  # (input index, input column name)
    subtype: str  # IDENTITY | TRANSFORMATION | AGGREGATION
    masking: bool
    explanation: str


def iter_synthetic_events(
    jobs: int, seed: int = 0, *, start: datetime = DEFAULT_START, producer: str = PRODUCER
) -> Iterator[dict[str, Any]]:
    """``jobs`` COMPLETE RunEvents, one per job, in dependency order (a job's inputs exist before it runs).

    Memory: proportional to the number of datasets generated so far (one small record per job's output,
    kept so later jobs can read it), not to the size of the events.
    """
    if jobs < 0:
        raise ValueError("jobs must be at least 0")
    rng = random.Random(seed)  # noqa: S311 - synthetic data, not security related
    sources = [_source_table(rng, index) for index in range(max(4, jobs // 5))]
    outputs: list[_Table] = []
    for index in range(jobs):
        inputs = _pick_inputs(rng, sources, outputs)
        stage = min(3, 1 + max(t.stage for t in inputs))
        output, derived, group_by = _design_output(rng, index, stage, inputs)
        outputs.append(output)
        yield _event(rng, index, start, producer, inputs, output, derived, group_by)


def _source_table(rng: random.Random, index: int) -> _Table:
    domain = rng.choice(sorted(_COLUMNS))
    columns = tuple(_Column(*c) for c in _COLUMNS[domain])
    if rng.random() < 0.6:
        return _Table(
            _POSTGRES,
            f"shop.public.{domain}_{index}",
            "postgres",
            domain,
            f"Operational {domain} table of the web shop (replica {index}).",
            columns,
            0,
        )
    return _Table(
        _S3,
        f"raw/{domain}/{domain}_{index}.parquet",
        "s3",
        domain,
        f"Daily Parquet export of {domain} from the event pipeline (feed {index}).",
        columns,
        0,
    )


def _pick_inputs(rng: random.Random, sources: list[_Table], outputs: list[_Table]) -> list[_Table]:
    count = rng.choice((1, 1, 2, 2, 3))
    chosen: list[_Table] = []
    while len(chosen) < count:
        if outputs and rng.random() < 0.65:
            # Prefer recent outputs: long multi-hop chains rather than a wide flat fan-out.
            table = outputs[max(0, len(outputs) - 1 - int(rng.expovariate(1 / 8)))]
        else:
            table = rng.choice(sources)
        if table not in chosen:
            chosen.append(table)
    return chosen


def _design_output(
    rng: random.Random, index: int, stage: int, inputs: list[_Table]
) -> tuple[_Table, list[_Derived], list[tuple[int, str]]]:
    primary = inputs[0]
    aggregate = stage >= 2 and rng.random() < 0.4
    derived: list[_Derived] = []
    group_by: list[tuple[int, str]] = []

    def add(candidate: _Derived) -> None:
        # The first derivation of a column name keeps it (e.g. the join key from the first input).
        if all(d.column.name != candidate.column.name for d in derived):
            derived.append(candidate)

    if aggregate:
        keys = [c for c in primary.columns if c.name in _GROUP_KEYS] or [primary.columns[0]]
        key = rng.choice(keys)
        group_by.append((0, key.name))
        add(
            _Derived(
                key,
                f"a.{key.name}",
                ((0, key.name),),
                "IDENTITY",
                False,
                f"Grouping key, copied from {primary.name}.{key.name}.",
            )
        )
        measures = [c for c in primary.columns if c.generic in ("money", "int", "decimal")]
        for measure in measures:
            add(
                _Derived(
                    _Column(
                        f"total_{measure.name}", measure.generic, f"Sum of {measure.name} per {key.name}."
                    ),
                    f"SUM(a.{measure.name})",
                    ((0, measure.name),),
                    "AGGREGATION",
                    False,
                    f"SUM of {measure.name} over all rows with the same {key.name}.",
                )
            )
        counted = primary.columns[0]
        add(
            _Derived(
                _Column(
                    f"{primary.domain}_count", "int", f"Number of distinct {primary.domain} per {key.name}."
                ),
                f"COUNT(DISTINCT a.{counted.name})",
                ((0, counted.name),),
                "AGGREGATION",
                True,
                f"COUNT(DISTINCT {counted.name}): only the number of rows is kept, not the identifiers.",
            )
        )
    for alias, table in enumerate(inputs):
        if aggregate and alias == 0:
            continue
        for column in table.columns:
            if rng.random() < 0.25:
                continue
            add(_derive(rng, alias, table, column))
    if not derived:
        derived.append(_derive(rng, 0, primary, primary.columns[0]))
    # Joins of joins would otherwise widen tables along every chain; real marts stay narrower.
    del derived[_MAX_COLUMNS:]
    stage_names = {
        1: ("staging", "stg"),
        2: ("marts", "fct" if aggregate else "dim"),
        3: ("reporting", "rpt"),
    }
    schema, short = stage_names[stage]
    name = f"{short}_{primary.domain}_{index}"
    if stage == 1:
        namespace, table_name, warehouse = _SNOWFLAKE, f"ANALYTICS.STAGING.{name.upper()}", "snowflake"
    elif stage == 2:
        namespace, table_name, warehouse = _SNOWFLAKE, f"ANALYTICS.MARTS.{name.upper()}", "snowflake"
    else:
        namespace, table_name, warehouse = _BIGQUERY, f"acme-reporting.{schema}.{name}", "bigquery"
    what = "aggregated per " + group_by[0][1] if aggregate else "cleaned and joined"
    output = _Table(
        namespace,
        table_name,
        warehouse,
        primary.domain,
        f"{primary.domain.capitalize()} {what}, built from {', '.join(t.name for t in inputs)}.",
        tuple(d.column for d in derived),
        stage,
    )
    return output, derived, group_by


def _derive(rng: random.Random, alias: int, table: _Table, column: _Column) -> _Derived:
    ref = f"{'abc'[alias]}.{column.name}"
    source = ((alias, column.name),)
    origin = f"{table.name}.{column.name}"
    if column.name in _PII:
        hashed = _Column(
            f"{column.name}_sha256", "hash", f"SHA-256 of {column.name}; the clear value is not kept."
        )
        return _Derived(
            hashed,
            f"SHA2({ref}, 256)",
            source,
            "TRANSFORMATION",
            True,
            f"SHA-256 hash of {origin}: pseudonymised, the original value cannot be read back.",
        )
    roll = rng.random()
    if column.generic == "timestamp" and roll < 0.5:
        day = _Column(
            f"{column.name.removesuffix('_at')}_date", "date", f"Calendar day (UTC) of {column.name}."
        )
        return _Derived(
            day,
            f"CAST({ref} AS DATE)",
            source,
            "TRANSFORMATION",
            False,
            f"Truncates {origin} to its UTC calendar day.",
        )
    if column.generic == "text" and roll < 0.3:
        return _Derived(
            column,
            f"LOWER(TRIM({ref}))",
            source,
            "TRANSFORMATION",
            False,
            f"{origin} with surrounding whitespace removed and lower-cased.",
        )
    if column.generic == "money" and roll < 0.3:
        usd = _Column(f"{column.name}_usd", "money", f"{column.name} converted to USD at the daily rate.")
        return _Derived(
            usd,
            f"{ref} * fx.usd_rate",
            source,
            "TRANSFORMATION",
            False,
            f"{origin} multiplied by that day's USD exchange rate.",
        )
    return _Derived(column, ref, source, "IDENTITY", False, f"Copied unchanged from {origin}.")


def _event(
    rng: random.Random,
    index: int,
    start: datetime,
    producer: str,
    inputs: list[_Table],
    output: _Table,
    derived: list[_Derived],
    group_by: list[tuple[int, str]],
) -> dict[str, Any]:
    aliases = "abc"
    joins: list[tuple[int, str, int, str]] = []
    for alias in range(1, len(inputs)):
        shared = [
            c.name
            for c in inputs[alias].columns
            if c.name.endswith("_id") and any(p.name == c.name for p in inputs[0].columns)
        ]
        key = shared[0] if shared else inputs[alias].columns[0].name
        left = key if any(c.name == key for c in inputs[0].columns) else inputs[0].columns[0].name
        joins.append((0, left, alias, key))
    status = next((c.name for c in inputs[0].columns if "status" in c.name), None)
    sort_key = next((c.name for c in inputs[0].columns if c.generic == "timestamp"), None)
    # Drawn exactly when earlier versions drew it, so that an organization stays the same for a seed.
    sorted_output = sort_key is not None and rng.random() < 0.3
    # The output is ordered (and says so in its lineage) only when it is not grouped: the SQL and the
    # column lineage describe the same query.
    if group_by or not sorted_output:
        sort_key = None
    job_namespace, job_name, integration, job_type, dialect = _job_identity(index, output, inputs)

    sql = _sql(output, inputs, derived, joins, status, group_by, sort_key, aliases, dialect)
    dataset_deps: list[dict[str, Any]] = []
    for left_alias, left, right_alias, right in joins:
        for alias, column in ((left_alias, left), (right_alias, right)):
            dataset_deps.append(
                _input_field(
                    inputs[alias],
                    column,
                    "INDIRECT",
                    "JOIN",
                    False,
                    f"Join key: {inputs[left_alias].name}.{left} = {inputs[right_alias].name}.{right}.",
                )
            )
    if status:
        dataset_deps.append(
            _input_field(
                inputs[0],
                status,
                "INDIRECT",
                "FILTER",
                False,
                f"Rows whose {status} is 'cancelled' are excluded.",
            )
        )
    for alias, column in group_by:
        dataset_deps.append(
            _input_field(
                inputs[alias], column, "INDIRECT", "GROUP_BY", False, f"One output row per distinct {column}."
            )
        )
    if sort_key:
        dataset_deps.append(
            _input_field(
                inputs[0], sort_key, "INDIRECT", "SORT", False, f"Output ordered by {sort_key}, newest first."
            )
        )

    event_time = start + timedelta(seconds=index * 7, microseconds=rng.randrange(1_000_000))
    return {
        "eventType": "COMPLETE",
        "eventTime": event_time.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "producer": producer,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "facets": {}},
        "job": {
            "namespace": job_namespace,
            "name": job_name,
            "facets": {
                "documentation": _facet(
                    producer,
                    "DocumentationJobFacet",
                    "1-1-0",
                    {
                        "description": f"Builds {output.name}: {output.description}",
                    },
                ),
                "sql": _facet(producer, "SQLJobFacet", "1-1-0", {"query": sql, "dialect": dialect}),
                "jobType": _facet(
                    producer,
                    "JobTypeJobFacet",
                    "2-0-4",
                    {
                        "processingType": "BATCH",
                        "integration": integration,
                        "jobType": job_type,
                    },
                ),
            },
        },
        "inputs": [
            {"namespace": t.namespace, "name": t.name, "facets": _dataset_facets(producer, t)} for t in inputs
        ],
        "outputs": [
            {
                "namespace": output.namespace,
                "name": output.name,
                "facets": {
                    **_dataset_facets(producer, output),
                    "columnLineage": _facet(
                        producer,
                        "ColumnLineageDatasetFacet",
                        "1-2-0",
                        {
                            "fields": {
                                d.column.name: {
                                    "inputFields": [
                                        _input_field(
                                            inputs[alias],
                                            column,
                                            "DIRECT",
                                            d.subtype,
                                            d.masking,
                                            d.explanation,
                                        )
                                        for alias, column in d.sources
                                    ]
                                }
                                for d in derived
                            },
                            "dataset": dataset_deps,
                        },
                    ),
                },
            }
        ],
    }


def _job_identity(index: int, output: _Table, inputs: list[_Table]) -> tuple[str, str, str, str, str]:
    short = output.name.rsplit(".", 1)[-1].lower()
    if output.stage == 1:
        return "airflow-prod", f"ingest_{inputs[0].domain}.load_{short}", "AIRFLOW", "TASK", "snowflake"
    if output.stage == 2:
        return "dbt-analytics", f"analytics.{short}", "DBT", "MODEL", "snowflake"
    return "spark-prod", f"reporting_app.execute_insert_into_table.{short}", "SPARK", "JOB", "bigquery"


def _sql(
    output: _Table,
    inputs: list[_Table],
    derived: list[_Derived],
    joins: list[tuple[int, str, int, str]],
    status: str | None,
    group_by: list[tuple[int, str]],
    sort_key: str | None,
    aliases: str,
    dialect: str,
) -> str:
    select_list = ",\n       ".join(f"{d.expression} AS {d.column.name}" for d in derived)
    lines = [
        f"INSERT INTO {_sql_name(output, dialect)}",
        f"SELECT {select_list}",
        f"FROM {_sql_name(inputs[0], dialect)} AS a",
    ]
    for _left_alias, left, right_alias, right in joins:
        lines.append(
            f"JOIN {_sql_name(inputs[right_alias], dialect)} AS {aliases[right_alias]} "
            f"ON a.{left} = {aliases[right_alias]}.{right}"
        )
    if any("fx.usd_rate" in d.expression for d in derived):
        lines.append("JOIN ref.fx_rates AS fx ON fx.rate_date = CURRENT_DATE")
    if status:
        lines.append(f"WHERE a.{status} <> 'cancelled'")
    if group_by:
        lines.append("GROUP BY " + ", ".join(f"{aliases[alias]}.{column}" for alias, column in group_by))
    if sort_key:
        lines.append(f"ORDER BY a.{sort_key} DESC")
    return "\n".join(lines)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*", re.ASCII)


def _sql_name(table: _Table, dialect: str) -> str:
    """The table's name as the query writes it: quoted when it is not plain identifiers (a file path)."""
    if _PLAIN_NAME.fullmatch(table.name):
        return table.name
    quote = "`" if dialect == "bigquery" else '"'
    return f"{quote}{table.name}{quote}"


def _facet(producer: str, name: str, version: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"_producer": producer, "_schemaURL": f"{_FACETS}/{version}/{name}.json#/$defs/{name}", **body}


def _dataset_facets(producer: str, table: _Table) -> dict[str, Any]:
    types = _TYPES[table.warehouse]
    return {
        "schema": _facet(
            producer,
            "SchemaDatasetFacet",
            "1-2-0",
            {
                "fields": [
                    {"name": c.name, "type": types[c.generic], "description": c.description}
                    for c in table.columns
                ]
            },
        ),
        "documentation": _facet(
            producer, "DocumentationDatasetFacet", "1-1-0", {"description": table.description}
        ),
    }


def _input_field(
    table: _Table, column: str, type_: str, subtype: str, masking: bool, description: str
) -> dict[str, Any]:
    return {
        "namespace": table.namespace,
        "name": table.name,
        "field": column,
        "transformations": [
            {"type": type_, "subtype": subtype, "description": description, "masking": masking}
        ],
    }
