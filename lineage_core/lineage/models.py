"""Tables of each organization's current lineage graph.

The graph is *current state*, not an event log: a job's row holds what the newest event that carried
its inputs and outputs said, and the ``*_version`` columns remember which event that was so that a late,
older event cannot overwrite it (see :mod:`lineage_core.lineage.versions`).

Child rows (fields, a job's datasets, column lineage) have composite primary keys that start with their
parent's id: replacing a job's lineage is ``DELETE ... WHERE job_id = ?`` plus inserts on one index, the
export streams a range of job ids with index range scans, and the frequent delete/re-insert of lineage
rows consumes no sequence values.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from lineage_core.infra.db import Base
from lineage_core.infra.models import UtcDateTime, utcnow

# Limits the ingest API checks before anything reaches these columns (see lineage_core.lineage.parse).
# _NO_PARENT_KEYS: the rows the ingest writes by the tens per event (a dataset's fields, a job's datasets,
# its reported column lineage) have no foreign keys to their job or dataset. Each key made PostgreSQL
# look up and share-lock the parent for every inserted row: measured, most of the database's cost of
# storing a new job's event. The merge only writes ids of jobs and datasets it locked or created in the
# same transaction, and jobs and datasets are deleted only with their organization; the keys'
# ON DELETE CASCADE is kept by triggers (migration 0011), so deleting a job, a dataset or their
# organization still deletes these rows.

NAMESPACE_MAX = 512
NAME_MAX = 1024
FIELD_NAME_MAX = 1024
LABEL_MAX = 200  # dialect, job type values, transformation subtype
VERSION_MAX = 64


class LineageJob(Base):
    """A job (namespace, name) of one organization, with its job facets and the version of its lineage."""

    __tablename__ = "lineage_jobs"
    __table_args__ = (
        UniqueConstraint("organization_id", "namespace", "name", name="uq_lineage_jobs_org_namespace_name"),
        # Keyset pagination of one org's jobs: WHERE organization_id = ? AND id > ? ORDER BY id.
        Index("ix_lineage_jobs_org_id", "organization_id", "id"),
        # "What changed since": the derivation's periodic check and its pass over changed jobs.
        Index("ix_lineage_jobs_org_updated", "organization_id", "updated_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    namespace: Mapped[str] = mapped_column(String(NAMESPACE_MAX))
    name: Mapped[str] = mapped_column(String(NAME_MAX))

    description: Mapped[str | None] = mapped_column(Text)
    sql: Mapped[str | None] = mapped_column(Text)
    sql_dialect: Mapped[str | None] = mapped_column(String(LABEL_MAX))
    processing_type: Mapped[str | None] = mapped_column(String(LABEL_MAX))
    integration: Mapped[str | None] = mapped_column(String(LABEL_MAX))
    job_type: Mapped[str | None] = mapped_column(String(LABEL_MAX))

    # eventTime of the event whose inputs/outputs/column lineage the job holds (None: none received yet).
    lineage_event_time: Mapped[datetime | None] = mapped_column(UtcDateTime())
    lineage_version: Mapped[str | None] = mapped_column(String(VERSION_MAX))
    documentation_version: Mapped[str | None] = mapped_column(String(VERSION_MAX))
    sql_version: Mapped[str | None] = mapped_column(String(VERSION_MAX))
    job_type_version: Mapped[str | None] = mapped_column(String(VERSION_MAX))

    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class LineageDataset(Base):
    """A dataset (namespace, name) of one organization, with its description and the version of its facets."""

    __tablename__ = "lineage_datasets"
    __table_args__ = (
        UniqueConstraint(
            "organization_id", "namespace", "name", name="uq_lineage_datasets_org_namespace_name"
        ),
        Index("ix_lineage_datasets_org_updated", "organization_id", "updated_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    namespace: Mapped[str] = mapped_column(String(NAMESPACE_MAX))
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    description: Mapped[str | None] = mapped_column(Text)

    schema_version: Mapped[str | None] = mapped_column(String(VERSION_MAX))
    documentation_version: Mapped[str | None] = mapped_column(String(VERSION_MAX))

    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class LineageDatasetField(Base):
    """One field of a dataset's current schema; ``position`` is its 0-based order in the schema facet."""

    __tablename__ = "lineage_dataset_fields"
    __table_args__ = (
        PrimaryKeyConstraint("dataset_id", "position", name="pk_lineage_dataset_fields"),
        UniqueConstraint("dataset_id", "name", name="uq_lineage_dataset_fields_dataset_name"),
    )

    dataset_id: Mapped[int] = mapped_column(Integer)  # no foreign key: see _NO_PARENT_KEYS
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(FIELD_NAME_MAX))
    type: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)


class LineageJobDataset(Base):
    """A job's input or output dataset, in the order the defining event listed them."""

    __tablename__ = "lineage_job_datasets"
    __table_args__ = (
        PrimaryKeyConstraint("job_id", "direction", "position", name="pk_lineage_job_datasets"),
        UniqueConstraint("job_id", "direction", "dataset_id", name="uq_lineage_job_datasets_job_dataset"),
        # "Which jobs read or write this dataset", and the cascade when a dataset is deleted.
        Index("ix_lineage_job_datasets_dataset", "dataset_id"),
    )

    # No foreign keys: see _NO_PARENT_KEYS.
    job_id: Mapped[int] = mapped_column(Integer)
    direction: Mapped[str] = mapped_column(String(6))  # "input" | "output"
    position: Mapped[int] = mapped_column(Integer)
    dataset_id: Mapped[int] = mapped_column(Integer)


class _ColumnLineageRow:
    """The columns of a column-lineage row, reported or derived: one transformation of one input field
    feeding one output field (or the whole output dataset).

    A row per transformation keeps the table flat: consecutive rows (by ``position``) with the same
    ``output_dataset_id``, ``output_field`` and ``input_index`` are the transformations of one
    ``inputFields`` entry. An entry without transformations is one row whose ``transformation_type`` is
    NULL. ``output_field`` NULL means a dataset-level dependency (``columnLineage.dataset`` in the spec).
    """

    position: Mapped[int] = mapped_column(Integer)
    # The two dataset ids have no foreign key and no index, on purpose: these are the largest tables and
    # each foreign key costs a lookup per inserted row (measured: the biggest part of storing an event).
    # The merge and the derivation only write ids of datasets they have just read or created in the same
    # transaction, datasets are deleted only with their organization, and the job's cascade removes
    # these rows then.
    output_dataset_id: Mapped[int] = mapped_column(Integer)
    output_field: Mapped[str | None] = mapped_column(String(FIELD_NAME_MAX))
    input_index: Mapped[int] = mapped_column(Integer)
    input_dataset_id: Mapped[int] = mapped_column(Integer)
    input_field: Mapped[str] = mapped_column(String(FIELD_NAME_MAX))
    transformation_type: Mapped[str | None] = mapped_column(String(16))
    transformation_subtype: Mapped[str | None] = mapped_column(String(LABEL_MAX))
    masking: Mapped[bool | None] = mapped_column(Boolean)
    transformation_description: Mapped[str | None] = mapped_column(Text)


class LineageColumnLineage(_ColumnLineageRow, Base):
    """Column lineage as producers reported it, kept exactly as sent (see :class:`_ColumnLineageRow`)."""

    __tablename__ = "lineage_column_lineage"
    __table_args__ = (PrimaryKeyConstraint("job_id", "position", name="pk_lineage_column_lineage"),)

    job_id: Mapped[int] = mapped_column(Integer)  # no foreign key: see _NO_PARENT_KEYS


class LineageDerivation(Base):
    """What deriving one job's column lineage from its SQL gave (see :mod:`lineage_core.lineage.derivations`).

    One row per job whose SQL was looked at. ``source_fingerprint`` hashes what the derivation read (the
    SQL and its dialect, the job's declared inputs and outputs, their schemas): the job is derived again
    only when it changes. ``problems`` and ``unmatched_tables`` are JSON lists of sentences and names.
    """

    __tablename__ = "lineage_derivations"
    __table_args__ = (Index("ix_lineage_derivations_org_status", "organization_id", "status"),)

    job_id: Mapped[int] = mapped_column(ForeignKey("lineage_jobs.id", ondelete="CASCADE"), primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    source_fingerprint: Mapped[str] = mapped_column(String(VERSION_MAX))
    status: Mapped[str] = mapped_column(String(16))  # "derived" | "partial" | "failed"
    edges: Mapped[int] = mapped_column(Integer, default=0)
    problems: Mapped[str | None] = mapped_column(Text)
    unmatched_tables: Mapped[str | None] = mapped_column(Text)
    derived_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class LineageDerivedColumnLineage(_ColumnLineageRow, Base):
    """Column lineage we derived from a job's SQL, shaped as what producers report.

    Kept apart from what producers reported, which it never overwrites: the export reads both and
    uses a derived entry only where the producer sent none (see :mod:`lineage_core.lineage.graph`).
    Each row is one transformation.
    """

    __tablename__ = "lineage_derived_column_lineage"
    __table_args__ = (PrimaryKeyConstraint("job_id", "position", name="pk_lineage_derived_column_lineage"),)

    job_id: Mapped[int] = mapped_column(ForeignKey("lineage_jobs.id", ondelete="CASCADE"))


class LineageDerivedJobDataset(Base):
    """A job's input or output derived from its SQL, for a job whose producer declared none."""

    __tablename__ = "lineage_derived_job_datasets"
    __table_args__ = (
        PrimaryKeyConstraint("job_id", "direction", "position", name="pk_lineage_derived_job_datasets"),
    )

    job_id: Mapped[int] = mapped_column(ForeignKey("lineage_jobs.id", ondelete="CASCADE"))
    direction: Mapped[str] = mapped_column(String(6))  # "input" | "output"
    position: Mapped[int] = mapped_column(Integer)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("lineage_datasets.id", ondelete="CASCADE"))


class LineageDerivationWatermark(Base):
    """Per organization, the newest change of its graph that a derivation has taken into account.

    The tick compares it with the newest ``updated_at`` of the org's jobs and datasets to find the
    organizations whose lineage may need deriving, without reading their SQL.
    """

    __tablename__ = "lineage_derivation_watermarks"

    organization_id: Mapped[int] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    changes_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # The engine that derived up to the watermark: another one derives the whole organization again.
    engine_revision: Mapped[str] = mapped_column(String(VERSION_MAX))
    derived_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


__all__ = [
    "LineageColumnLineage",
    "LineageDataset",
    "LineageDatasetField",
    "LineageDerivation",
    "LineageDerivationWatermark",
    "LineageDerivedColumnLineage",
    "LineageDerivedJobDataset",
    "LineageJob",
    "LineageJobDataset",
]
