"""A checked OpenLineage event, reduced to what the lineage store keeps.

:func:`lineage_core.lineage.parse.parse_event` builds these from the JSON a producer sent; the merge
(:mod:`lineage_core.lineage.merge`) applies them. Facets the store does not keep are dropped here.

A facet slot is ``None`` when the event does not carry that facet (the held state is left alone),
:data:`DELETED` when the event carries it with ``"_deleted": true`` (the spec's way to remove a facet),
or the facet's content.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from lineage_core.lineage import versions


class Deleted(enum.Enum):
    """The type of :data:`DELETED`."""

    DELETED = "deleted"


DELETED: Final = Deleted.DELETED


class EventKind(enum.StrEnum):
    RUN = "RunEvent"
    JOB = "JobEvent"
    DATASET = "DatasetEvent"


class EventType(enum.StrEnum):
    START = "START"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    ABORT = "ABORT"
    FAIL = "FAIL"
    OTHER = "OTHER"


# Ties between events of the same eventTime: the state a run ends in beats the state it started with.
_LINEAGE_RANK = {
    EventType.START: 1,
    EventType.RUNNING: 2,
    EventType.OTHER: 2,
    None: 2,  # a RunEvent without eventType (the spec allows it)
    EventType.COMPLETE: 4,
}
_JOB_EVENT_RANK = 3
_FACET_RANK = 0


@dataclass(frozen=True, slots=True)
class Field:
    """A schema field; nested fields arrive flattened with dotted names ("address.city")."""

    name: str
    type: str | None
    description: str | None


@dataclass(frozen=True, slots=True)
class Transformation:
    type: str  # DIRECT | INDIRECT
    subtype: str | None
    masking: bool | None
    description: str | None


@dataclass(frozen=True, slots=True)
class InputField:
    """One entry of ``inputFields`` (or of ``dataset``) in a columnLineage facet."""

    namespace: str
    name: str
    field: str
    transformations: tuple[Transformation, ...]


@dataclass(frozen=True, slots=True)
class ColumnLineage:
    """A columnLineage facet: per output field its input fields, plus dataset-level dependencies."""

    fields: tuple[tuple[str, tuple[InputField, ...]], ...]
    dataset: tuple[InputField, ...]


@dataclass(frozen=True, slots=True)
class Sql:
    query: str
    dialect: str | None


@dataclass(frozen=True, slots=True)
class JobType:
    processing_type: str
    integration: str
    job_type: str | None


@dataclass(frozen=True, slots=True)
class Dataset:
    namespace: str
    name: str
    schema: tuple[Field, ...] | Deleted | None = None
    documentation: str | Deleted | None = None
    # Only on outputs of a RunEvent or JobEvent: column lineage belongs to the job that writes the dataset.
    column_lineage: ColumnLineage | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Job:
    namespace: str
    name: str
    documentation: str | Deleted | None = None
    sql: Sql | Deleted | None = None
    job_type: JobType | Deleted | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """A checked event. ``job`` is None only for a DatasetEvent, ``dataset`` set only for one."""

    kind: EventKind
    event_time: datetime
    event_type: EventType | None = None
    run_id: uuid.UUID | None = None
    job: Job | None = None
    inputs: tuple[Dataset, ...] = ()
    outputs: tuple[Dataset, ...] = ()
    dataset: Dataset | None = None
    producer: str = ""

    @property
    def carries_lineage(self) -> bool:
        """Whether this event defines the job's inputs, outputs and column lineage.

        An event with neither inputs nor outputs says nothing about them (a START sent before the
        datasets are known); a FAIL or ABORT describes a run that did not produce its outputs. Neither
        erases the lineage the job holds.
        """
        if self.job is None or (not self.inputs and not self.outputs):
            return False
        return self.event_type not in (EventType.FAIL, EventType.ABORT)

    def datasets(self) -> tuple[Dataset, ...]:
        """Every dataset this event describes, in order: inputs, outputs, the DatasetEvent's dataset."""
        return (*self.inputs, *self.outputs, *((self.dataset,) if self.dataset else ()))

    def lineage_version(self) -> str:
        """The version (see :mod:`versions`) of the inputs, outputs and column lineage this event carries."""
        rank = _JOB_EVENT_RANK if self.kind is EventKind.JOB else _LINEAGE_RANK[self.event_type]
        content = ([d.key for d in self.inputs], [(d.key, d.column_lineage) for d in self.outputs])
        return versions.make_version(self.event_time, rank, versions.fingerprint(content))

    def facet_version(self, content: object) -> str:
        """The version of one facet's ``content`` as carried by this event."""
        digest = "" if content is DELETED else versions.fingerprint(content)
        return versions.make_version(self.event_time, _FACET_RANK, digest)
