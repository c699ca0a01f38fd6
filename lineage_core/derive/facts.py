"""The intermediate facts of a derivation: where a column comes from, and how.

A :class:`Contribution` says that one input column reaches one place (an output column, or every
row of the output) in one way (DIRECT IDENTITY, INDIRECT FILTER, ...), with the material of its
explanation. Sources are already resolved to declared (or derived) datasets and to the field's
declared spelling, so contributions survive from one statement to the next (temp tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lineage_core.derive.explain import Note


@dataclass(frozen=True, slots=True)
class Source:
    """One column of one input dataset."""

    namespace: str
    name: str
    field: str


@dataclass(frozen=True, slots=True)
class Contribution:
    source: Source
    type: str  # "DIRECT" | "INDIRECT"
    subtype: str
    masking: bool
    note: Note


@dataclass(slots=True)
class Virtual:
    """A table an earlier statement of the same job wrote (temp table, undeclared intermediate).

    Reading it later resolves through to the contributions that built it, like a CTE.
    """

    columns: list[str]
    lineage: dict[str, tuple[Contribution, ...]]
    dataset: tuple[Contribution, ...]


@dataclass(slots=True)
class Binding:
    """What one physical table reference of a statement stands for.

    ``kind`` is ``"dataset"`` (a declared or derived dataset: its columns are inputs), ``"virtual"``
    (an earlier statement's output), ``"self"`` (the written table, read by MERGE/UPDATE: its own
    previous values, no edges), or ``"unmatched"`` (a table that names no declared dataset: reported,
    no edges).
    """

    kind: str
    label: str  # for explanations: the dataset name, or the table as written
    namespace: str = ""
    name: str = ""
    fields: tuple[str, ...] = ()
    virtual: Virtual | None = None
    spelling: dict[str, str] = field(default_factory=dict)

    def known_columns(self) -> tuple[str, ...] | None:
        """The columns qualify() may assume, or ``None`` when unknown (star not expandable)."""
        if self.kind == "dataset" and self.fields:
            return self.fields
        if self.kind == "virtual" and self.virtual is not None and self.virtual.columns:
            return tuple(self.virtual.columns)
        return None

    def field_name(self, normalized: str) -> str:
        """The declared spelling of a column qualify() normalised; the normalised name when unknown."""
        return self.spelling.get(normalized.casefold(), normalized)
