"""Turn contributions into deduplicated, ordered, explained :class:`DerivedEdge` values.

Dedupe rule: one edge per (output dataset, output field, input dataset, input field, type,
subtype). When the same pair is reached through several paths, masking holds only if every path
masks (one clear copy is enough to expose the value), and the explanation is that of the first path
in walk order with that masking value. The same input column reaching an output both as IDENTITY
and as TRANSFORMATION keeps both edges, since they are distinct subtypes.

Order: outputs in the order the statements wrote them; within an output, field-level edges by
output column position, DIRECT before INDIRECT, then input namespace, name, field and subtype;
dataset-level edges last, JOIN, FILTER, GROUP_BY, SORT, then input namespace, name and field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lineage_core.derive.explain import describe
from lineage_core.derive.facts import Contribution
from lineage_core.derive.model import DerivedEdge

_SUBTYPE_ORDER = {
    name: rank
    for rank, name in enumerate(
        (
            "IDENTITY",
            "TRANSFORMATION",
            "AGGREGATION",
            "JOIN",
            "FILTER",
            "GROUP_BY",
            "SORT",
            "WINDOW",
            "CONDITIONAL",
        )
    )
}


_SortKey = tuple[int, int, str, str, str, int]


@dataclass(slots=True)
class OutputLineage:
    """Everything one written dataset received, accumulated over the statements that wrote it."""

    namespace: str
    name: str
    fields: list[str] = field(default_factory=list)
    by_field: dict[str, list[Contribution]] = field(default_factory=dict)
    rows: list[Contribution] = field(default_factory=list)

    def add_field(self, name: str, contributions: Sequence[Contribution]) -> None:
        if name not in self.by_field:
            self.fields.append(name)
            self.by_field[name] = []
        self.by_field[name].extend(contributions)


def _key(c: Contribution) -> tuple[str, str, str, str, str]:
    return (c.source.namespace, c.source.name, c.source.field, c.type, c.subtype)


def _edges_for(
    output: OutputLineage, out_field: str | None, contributions: Sequence[Contribution]
) -> list[tuple[_SortKey, DerivedEdge]]:
    grouped: dict[tuple[str, str, str, str, str], list[Contribution]] = {}
    for contribution in contributions:
        grouped.setdefault(_key(contribution), []).append(contribution)
    position = output.fields.index(out_field) if out_field is not None else len(output.fields)
    result: list[tuple[_SortKey, DerivedEdge]] = []
    for key, group in grouped.items():
        masking = all(c.masking for c in group)
        chosen = next(c for c in group if c.masking == masking)
        namespace, name, in_field, type_, subtype = key
        text = describe(
            type_, subtype, masking, chosen.note, out_field, in_field, name, field_level=out_field is not None
        )
        edge = DerivedEdge(
            output_namespace=output.namespace,
            output_name=output.name,
            output_field=out_field,
            input_namespace=namespace,
            input_name=name,
            input_field=in_field,
            type=type_,
            subtype=subtype,
            masking=masking,
            description=text,
        )
        rank = _SUBTYPE_ORDER.get(subtype, 99)
        if out_field is None:
            sort_key: _SortKey = (position, rank, namespace, name, in_field, 0)
        else:
            sort_key = (position, 0 if type_ == "DIRECT" else 1, namespace, name, in_field, rank)
        result.append((sort_key, edge))
    return result


def assemble(outputs: Sequence[OutputLineage]) -> tuple[DerivedEdge, ...]:
    """All edges of all outputs, deduplicated and in the documented order."""
    edges: list[DerivedEdge] = []
    for output in outputs:
        keyed: list[tuple[_SortKey, DerivedEdge]] = []
        for out_field in output.fields:
            keyed.extend(_edges_for(output, out_field, output.by_field[out_field]))
        keyed.extend(_edges_for(output, None, output.rows))
        keyed.sort(key=lambda pair: pair[0])
        edges.extend(edge for _key_, edge in keyed)
    return tuple(edges)
