"""The JSON shape of the OpenLineage events the store reads, as msgspec Structs.

:mod:`lineage_core.lineage.fast_path` converts a decoded event into these in one call of compiled code
(``msgspec.convert``), which checks on the way every field the store reads: its JSON type, its length
against the store's column, ``eventType`` and transformation types against their lists. Keys the store does
not read are ignored, as the detailed checker of :mod:`lineage_core.lineage.parse` ignores them.

The shape is never looser than that checker. A field the checker requires is required here, except in a
facet, where ``"_deleted": true`` makes the rest of it irrelevant (the fast path checks those). An optional
field may be absent but never ``null``: the checker calls ``null`` a wrong type, and so does msgspec here.
What the shape cannot say (blank names, NULs, formats, uniqueness) the fast path checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from lineage_core.lineage.event import EventType
from lineage_core.lineage.models import FIELD_NAME_MAX, LABEL_MAX, NAME_MAX, NAMESPACE_MAX
from lineage_core.lineage.rules import TransformationType

# Lengths count characters (code points), as the checker's len() does.
Namespace = Annotated[str, Meta(max_length=NAMESPACE_MAX)]
Name = Annotated[str, Meta(max_length=NAME_MAX)]
FieldName = Annotated[str, Meta(max_length=FIELD_NAME_MAX)]
Label = Annotated[str, Meta(max_length=LABEL_MAX)]

if TYPE_CHECKING:
    # What an optional leaf field holds: its value, or None when the key is absent.
    OptionalText = str | None
    OptionalLabel = Label | None
    OptionalBool = bool | None
    OptionalInteger = int | None
else:
    # What msgspec accepts for it: the value only, so a JSON null is a type error. An absent key takes the
    # field's default None (msgspec does not check defaults against the annotation). The Event's own
    # dataclasses use None for "absent" too, so msgspec can build them from these Structs directly.
    OptionalText = str
    OptionalLabel = Label
    OptionalBool = bool
    OptionalInteger = int

# kw_only: a facet's fields follow the inherited, defaulted "_deleted". Unknown keys are ignored (msgspec's
# default) because producers add fields and facets of their own. gc=False: these Structs are built from
# JSON, a tree (never a cycle), and live for one event; left out of the collector, a wide event's
# thousands of them trigger fewer collections (a 2,000-column event: 6.3 ms instead of 7.4 ms).


class AnyObject(Struct, gc=False):
    """A JSON object whose content the store does not read (``run.facets``, ``inputFacets``)."""


class Facet(Struct, kw_only=True, gc=False):
    deleted: bool = msgspec.field(default=False, name="_deleted")


class DocumentationFacet(Facet, kw_only=True):
    description: OptionalText = None  # required unless the facet is deleted


class SqlFacet(Facet, kw_only=True):
    query: OptionalText = None  # required unless the facet is deleted
    dialect: OptionalLabel = None


class JobTypeFacet(Facet, kw_only=True):
    processing_type: OptionalLabel = msgspec.field(default=None, name="processingType")  # required (as query)
    integration: OptionalLabel = None  # required unless the facet is deleted
    job_type: OptionalLabel = msgspec.field(default=None, name="jobType")


class SchemaField(Struct, kw_only=True, gc=False):
    # FIELD_NAME_MAX bounds the name with its parents' names; the name alone cannot be longer.
    name: FieldName
    type: OptionalText = None
    description: OptionalText = None
    ordinal_position: OptionalInteger = None
    fields: list[SchemaField] = msgspec.field(default_factory=list)  # a struct's own fields


class SchemaFacet(Facet, kw_only=True):
    fields: list[SchemaField] = msgspec.field(default_factory=list)


class Transformation(Struct, kw_only=True, gc=False):
    """Attribute for attribute the Event's :class:`~lineage_core.lineage.event.Transformation`."""

    type: TransformationType
    subtype: OptionalLabel = None
    masking: OptionalBool = None
    description: OptionalText = None


class InputField(Struct, kw_only=True, gc=False):
    """Attribute for attribute the Event's :class:`~lineage_core.lineage.event.InputField`."""

    namespace: Namespace
    name: Name
    field: FieldName
    transformations: list[Transformation] = msgspec.field(default_factory=list)


class FieldLineage(Struct, kw_only=True, gc=False):
    input_fields: list[InputField] = msgspec.field(name="inputFields")


class ColumnLineageFacet(Facet, kw_only=True):
    fields: dict[FieldName, FieldLineage] | UnsetType = UNSET  # required unless the facet is deleted
    dataset: list[InputField] = msgspec.field(default_factory=list)


class JobFacets(Struct, kw_only=True, gc=False):
    documentation: DocumentationFacet | UnsetType = UNSET
    sql: SqlFacet | UnsetType = UNSET
    job_type: JobTypeFacet | UnsetType = msgspec.field(default=UNSET, name="jobType")


class Job(Struct, kw_only=True, gc=False):
    namespace: Namespace
    name: Name
    facets: JobFacets = msgspec.field(default_factory=JobFacets)


class Run(Struct, kw_only=True, gc=False):
    run_id: str = msgspec.field(name="runId")
    facets: AnyObject | UnsetType = UNSET


class DatasetFacets(Struct, kw_only=True, gc=False):
    schema: SchemaFacet | UnsetType = UNSET
    documentation: DocumentationFacet | UnsetType = UNSET


class OutputDatasetFacets(DatasetFacets, kw_only=True):
    # Column lineage is read on outputs only: it belongs to the job that writes the dataset.
    column_lineage: ColumnLineageFacet | UnsetType = msgspec.field(default=UNSET, name="columnLineage")


class InputDataset(Struct, kw_only=True, gc=False):
    """An input of a Run/JobEvent, and the dataset of a DatasetEvent."""

    namespace: Namespace
    name: Name
    facets: DatasetFacets = msgspec.field(default_factory=DatasetFacets)
    input_facets: AnyObject | UnsetType = msgspec.field(default=UNSET, name="inputFacets")


class OutputDataset(Struct, kw_only=True, gc=False):
    namespace: Namespace
    name: Name
    facets: OutputDatasetFacets = msgspec.field(default_factory=OutputDatasetFacets)
    output_facets: AnyObject | UnsetType = msgspec.field(default=UNSET, name="outputFacets")


class EventHeader(Struct, kw_only=True, gc=False):
    """What every kind of event carries."""

    event_time: str = msgspec.field(name="eventTime")
    producer: str
    schema_url: str = msgspec.field(name="schemaURL")


class RunEvent(EventHeader, kw_only=True):
    event_type: EventType | UnsetType = msgspec.field(default=UNSET, name="eventType")
    run: Run
    job: Job
    inputs: list[InputDataset] = msgspec.field(default_factory=list)
    outputs: list[OutputDataset] = msgspec.field(default_factory=list)


class JobEvent(EventHeader, kw_only=True):
    job: Job
    inputs: list[InputDataset] = msgspec.field(default_factory=list)
    outputs: list[OutputDataset] = msgspec.field(default_factory=list)


class DatasetEvent(EventHeader, kw_only=True):
    # A DatasetEvent's other keys are not read (the checker ignores inputs/outputs there too).
    dataset: InputDataset
