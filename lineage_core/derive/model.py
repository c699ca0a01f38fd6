"""The public value types of the derivation engine.

Everything here is a frozen, slotted dataclass of plain strings, booleans and tuples, so a
:class:`Derivation` can be compared, hashed, cached and serialised without touching sqlglot.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DatasetSchema:
    """One dataset the job declared (or the store knows).

    ``fields`` are the column names in schema order; ``()`` when no schema is known, in which
    case columns are still followed when the SQL names them explicitly, but ``*`` cannot be expanded.
    """

    namespace: str
    name: str
    fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DerivedEdge:
    """One column-lineage dependency, in the vocabulary of the OpenLineage column lineage facet 1-2-0.

    ``output_field`` is ``None`` for a dataset-level dependency (the facet's ``dataset`` list):
    JOIN, FILTER, GROUP_BY and SORT, which decide which rows exist rather than one column's value.
    ``description`` is a plain-English sentence, never empty.
    """

    output_namespace: str
    output_name: str
    output_field: str | None
    input_namespace: str
    input_name: str
    input_field: str
    type: str
    subtype: str
    masking: bool
    description: str


@dataclass(frozen=True, slots=True)
class Derivation:
    """What :func:`lineage_core.derive.derive` could tell from a job's SQL.

    ``status`` is ``"derived"`` when every statement was understood, ``"partial"`` when some lineage
    was derived but something was not (see ``problems``), ``"failed"`` when nothing was derived.
    """

    edges: tuple[DerivedEdge, ...]
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    unmatched_tables: tuple[str, ...]
    problems: tuple[str, ...]
    status: str
