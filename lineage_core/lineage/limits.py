"""How much one event may ask of the store: the work per event is bounded before it is walked or stored.

Storing an event costs about 0.17 ms per distinct dataset, 0.03 ms per schema field and 0.04 ms per
column-lineage edge on PostgreSQL (``bench`` figures in the README's Security section). Without limits a
5 MiB RunEvent of 140,000 distinct inputs held a web worker for 27 s, near gunicorn's 30 s timeout.

The limits are generous for real producers:

* inputs: Spark reports one input per partition or file of a wildcard read, which reaches thousands
  (OpenLineage issue #3306); 5,000.
* outputs: jobs write a handful of tables; 1,000.
* fields per schema: BigQuery allows 10,000 columns per table, Snowflake and PostgreSQL fewer; 10,000,
  nested fields included.
* fields per event: every schema of the event together; 100,000 (ten tables at BigQuery's maximum).
* column-lineage edges per event: every ``inputFields`` entry of every output field plus the
  dataset-level ``dataset`` entries. Spark's DISTINCT and GROUP BY make every output column depend on
  every input column (OpenLineage issue #2874): 300 columns give 90,000 edges; 100,000.

:func:`check_event_size` counts on the decoded JSON in one pass, before the event's fields are
checked: a body of a million empty inputs is refused at the cost of reading its length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class EventLimits:
    inputs: int = 5_000
    outputs: int = 1_000
    fields_per_schema: int = 10_000
    fields_per_event: int = 100_000
    column_lineage_edges: int = 100_000


DEFAULT_LIMITS = EventLimits()


@dataclass(frozen=True, slots=True)
class LimitBreach:
    """The first limit an event goes over: the field's path, a sentence naming the limit."""

    field: str
    message: str


def check_event_size(data: Any, limits: EventLimits = DEFAULT_LIMITS) -> LimitBreach | None:
    """The first limit the decoded event ``data`` breaks, or None. Never raises on any JSON value."""
    if not isinstance(data, dict):
        return None
    for key, limit in (("inputs", limits.inputs), ("outputs", limits.outputs)):
        items = data.get(key)
        if isinstance(items, list) and len(items) > limit:
            return LimitBreach(
                key,
                f"The event lists {len(items):,} {key}; at most {limit:,} are allowed per event. "
                f"Send the {key} in several events, or group partitions of one table as one dataset.",
            )
    datasets: list[tuple[str, Any]] = []
    for key in ("inputs", "outputs"):
        items = data.get(key)
        if isinstance(items, list):
            datasets.extend((f"{key}[{index}]", item) for index, item in enumerate(items))
    if "dataset" in data:
        datasets.append(("dataset", data["dataset"]))

    event_fields = 0
    edges = 0
    for path, dataset in datasets:
        facets = dataset.get("facets") if isinstance(dataset, dict) else None
        if not isinstance(facets, dict):
            continue
        fields = _schema_field_count(facets.get("schema"), limits.fields_per_schema + 1)
        if fields > limits.fields_per_schema:
            return LimitBreach(
                f"{path}.facets.schema.fields",
                f"{path}.facets.schema has more than {limits.fields_per_schema:,} fields (nested fields "
                "included); at most that many are allowed per schema.",
            )
        event_fields += fields
        if event_fields > limits.fields_per_event:
            return LimitBreach(
                f"{path}.facets.schema.fields",
                f"The event's schemas have more than {limits.fields_per_event:,} fields together; at most "
                "that many are allowed per event. Send the datasets' schemas in several events.",
            )
        edges += _edge_count(facets.get("columnLineage"))
        if edges > limits.column_lineage_edges:
            return LimitBreach(
                f"{path}.facets.columnLineage",
                f"The event's columnLineage facets have more than {limits.column_lineage_edges:,} input "
                "fields together; at most that many are allowed per event.",
            )
    return None


def _schema_field_count(schema: Any, stop_at: int) -> int:
    """Fields of a schema facet, nested ones included; counting stops once ``stop_at`` is reached."""
    count = 0
    pending = [schema]
    while pending:
        node = pending.pop()
        fields = node.get("fields") if isinstance(node, dict) else None
        if not isinstance(fields, list):
            continue
        count += len(fields)
        if count >= stop_at:
            return count
        pending.extend(field for field in fields if isinstance(field, dict) and "fields" in field)
    return count


def _edge_count(column_lineage: Any) -> int:
    if not isinstance(column_lineage, dict):
        return 0
    edges = 0
    fields = column_lineage.get("fields")
    if isinstance(fields, dict):
        for spec in fields.values():
            inputs = spec.get("inputFields") if isinstance(spec, dict) else None
            if isinstance(inputs, list):
                edges += len(inputs)
    dataset = column_lineage.get("dataset")
    if isinstance(dataset, list):
        edges += len(dataset)
    return edges
