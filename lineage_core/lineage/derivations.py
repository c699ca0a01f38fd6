"""Column lineage derived from jobs' SQL, in the lineage store: which jobs need it, deriving, the results.

Producers often send a job's SQL (the ``sql`` job facet) and its table-level inputs and outputs, but
no ``columnLineage``. This module gives those jobs column lineage and explanations, off the ingest
request path:

1. **Sources.** For each job of an organization that has SQL: the query and its dialect, the job's
   declared inputs and outputs, and the fields of their current schemas. Their content is hashed into
   a *source fingerprint* (with :data:`ENGINE_REVISION`); a job is derived again only when it differs
   from the one its last derivation recorded, i.e. when its SQL, its datasets or their schemas change.
2. **Derivation** by the pure engine :func:`lineage_core.derive.derive`.
3. **Results** go to tables of their own (``lineage_derived_column_lineage``, and
   ``lineage_derived_job_datasets`` for a job whose producer declared no inputs or outputs), never
   into what producers reported. The outcome per job (derived, partial, failed; the problems, the SQL
   tables that matched no dataset) goes to ``lineage_derivations``, for ``/ops/``, ``/metrics`` and the
   CLI. The export merges the two (:mod:`lineage_core.lineage.graph`): reported lineage wins.

Who runs it: :mod:`lineage_core.lineage.derivation_schedule` (a worker job per organization whose
graph changed); ``flask lineage derive --org ORG`` runs :func:`derive_organization` at once. What it
gave is read back by :mod:`lineage_core.lineage.derivation_status`. Nothing here ever fails ingest
or an export: SQL that does not parse is recorded as a failed derivation and the job is exported
with what it has.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from importlib import metadata
from typing import Any, cast

import orjson
from sqlalchemy import Table, delete, insert, select, text
from sqlalchemy.orm import Session

from lineage_core.derive import DatasetSchema, Derivation, DerivedEdge, derive
from lineage_core.infra.models import utcnow
from lineage_core.lineage import versions
from lineage_core.lineage.merge import ensure_datasets
from lineage_core.lineage.models import (
    LineageDataset,
    LineageDatasetField,
    LineageDerivation,
    LineageDerivedColumnLineage,
    LineageDerivedJobDataset,
    LineageJob,
    LineageJobDataset,
)

logger = logging.getLogger(__name__)

# Bump when the engine's output changes for the same SQL: every job is then derived again once (the
# periodic check treats an organization derived by another revision as due, from scratch).
ENGINE_REVISION = f"1/sqlglot-{metadata.version('sqlglot')}"
JOBS_PER_TRANSACTION = 200
# pg_advisory_xact_lock(key, organization id): the first key says "derivation of an organization".
_LOCK_KEY = 0x0D371E
# Statuses of lineage_derivations.status, as the engine names them.
DERIVED, PARTIAL, FAILED = "derived", "partial", "failed"

_JOBS = cast(Table, LineageJob.__table__)
_DATASETS = cast(Table, LineageDataset.__table__)
_FIELDS = cast(Table, LineageDatasetField.__table__)
_JOB_DATASETS = cast(Table, LineageJobDataset.__table__)
_DERIVATIONS = cast(Table, LineageDerivation.__table__)
_DERIVED_LINEAGE = cast(Table, LineageDerivedColumnLineage.__table__)
_DERIVED_LINKS = cast(Table, LineageDerivedJobDataset.__table__)


@dataclass
class DeriveReport:
    """What one pass over an organization did."""

    jobs_with_sql: int = 0
    derived: int = 0  # jobs whose lineage was derived (again) in this pass
    unchanged: int = 0  # jobs whose sources had not changed since their last derivation
    partial: int = 0
    failed: int = 0
    edges: int = 0  # column-lineage edges written in this pass
    removed: int = 0  # derivations dropped because their job no longer has SQL
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (job namespace, name, problem)

    def as_dict(self) -> dict[str, int]:
        return {key: value for key, value in asdict(self).items() if isinstance(value, int)}


@dataclass(frozen=True, slots=True)
class _Declared:
    direction: str
    dataset_id: int
    namespace: str
    name: str
    schema_version: str | None


@dataclass(frozen=True, slots=True)
class _JobSource:
    job_id: int
    namespace: str
    name: str
    sql: str
    dialect: str | None
    declared: tuple[_Declared, ...]
    fields: dict[int, tuple[str, ...]]

    def fingerprint(self) -> str:
        schemas = [(d.direction, d.namespace, d.name, _content_of(d.schema_version)) for d in self.declared]
        return versions.fingerprint([ENGINE_REVISION, self.sql, self.dialect, self.namespace, schemas])

    def schemas(self, direction: str) -> list[DatasetSchema]:
        return [
            DatasetSchema(d.namespace, d.name, self.fields.get(d.dataset_id, ()))
            for d in self.declared
            if d.direction == direction
        ]


def _content_of(version: str | None) -> str | None:
    """The content fingerprint inside a facet version (its time does not change what is derived)."""
    return version.rsplit("/", 1)[1] if version else None


# -- deriving ---------------------------------------------------------------------------------------------


def derive_organization(
    session: Session, organization_id: int, *, since: datetime | None = None, force: bool = False
) -> DeriveReport:
    """Derive column lineage for every job of the organization whose SQL or datasets changed.

    Commits every :data:`JOBS_PER_TRANSACTION` jobs, so a large organization makes steady progress and
    holds no lock for long; a job's rows are replaced in one transaction, entirely or not at all. Two
    passes over one organization at once (the worker's and ``flask lineage derive``) take turns page by
    page (:func:`_lock_organization`): the second finds what the first derived and skips it.

    Args:
        since: only look at jobs changed after this time, or reading a dataset changed after it (the
            organization's watermark); None looks at every job with SQL. Either way a job is derived
            only when its source fingerprint changed.
        force: derive every job with SQL, even those whose sources did not change.
    """
    report = DeriveReport()
    report.removed = _drop_derivations_without_sql(session, organization_id)
    session.commit()
    for page in _source_pages(session, organization_id, None if force else since):
        _lock_organization(session, organization_id)
        held = dict(
            session.execute(
                select(_DERIVATIONS.c.job_id, _DERIVATIONS.c.source_fingerprint).where(
                    _DERIVATIONS.c.job_id.in_([source.job_id for source in page])
                )
            ).all()
        )
        results: list[tuple[_JobSource, str, Derivation]] = []
        for source in page:
            report.jobs_with_sql += 1
            fingerprint = source.fingerprint()
            if not force and held.get(source.job_id) == fingerprint:
                report.unchanged += 1
                continue
            derivation = derive(
                source.sql,
                source.dialect,
                inputs=source.schemas("input"),
                outputs=source.schemas("output"),
                job_namespace=source.namespace,
            )
            results.append((source, fingerprint, derivation))
            report.derived += 1
            if derivation.status == PARTIAL:
                report.partial += 1
            elif derivation.status == FAILED:
                report.failed += 1
            report.problems.extend((source.namespace, source.name, p) for p in derivation.problems)
        report.edges += _store(session, organization_id, results)
        session.commit()
    logger.info(
        "lineage derivation of organization %s: %d jobs with SQL, %d derived (%d partial, %d failed), "
        "%d unchanged, %d edges",
        organization_id,
        report.jobs_with_sql,
        report.derived,
        report.partial,
        report.failed,
        report.unchanged,
        report.edges,
    )
    return report


def _source_pages(
    session: Session, organization_id: int, since: datetime | None, page_size: int = JOBS_PER_TRANSACTION
) -> Iterator[list[_JobSource]]:
    """The organization's jobs that have SQL (changed since ``since``), with what derivation reads.

    A page at a time, by ascending job id.
    """
    changed: Any = True
    if since is not None:
        reads_changed_dataset = (
            select(_JOB_DATASETS.c.job_id)
            .join(_DATASETS, _DATASETS.c.id == _JOB_DATASETS.c.dataset_id)
            .where(_JOB_DATASETS.c.job_id == _JOBS.c.id, _DATASETS.c.updated_at > since)
            .exists()
        )
        changed = (_JOBS.c.updated_at > since) | reads_changed_dataset
    after = 0
    while True:
        jobs = session.execute(
            select(_JOBS.c.id, _JOBS.c.namespace, _JOBS.c.name, _JOBS.c.sql, _JOBS.c.sql_dialect)
            .where(
                _JOBS.c.organization_id == organization_id,
                _JOBS.c.id > after,
                _JOBS.c.sql.is_not(None),
                changed,
            )
            .order_by(_JOBS.c.id)
            .limit(page_size)
        ).all()
        if not jobs:
            return
        ids = [job[0] for job in jobs]
        declared: dict[int, list[_Declared]] = {}
        for job_id, direction, dataset_id, namespace, name, schema_version in session.execute(
            select(
                _JOB_DATASETS.c.job_id,
                _JOB_DATASETS.c.direction,
                _DATASETS.c.id,
                _DATASETS.c.namespace,
                _DATASETS.c.name,
                _DATASETS.c.schema_version,
            )
            .join(_DATASETS, _DATASETS.c.id == _JOB_DATASETS.c.dataset_id)
            .where(_JOB_DATASETS.c.job_id.in_(ids))
            .order_by(_JOB_DATASETS.c.job_id, _JOB_DATASETS.c.direction, _JOB_DATASETS.c.position)
        ).all():
            declared.setdefault(job_id, []).append(
                _Declared(direction, dataset_id, namespace, name, schema_version)
            )
        dataset_ids = sorted({d.dataset_id for links in declared.values() for d in links})
        fields: dict[int, list[str]] = {}
        if dataset_ids:
            for dataset_id, field_name in session.execute(
                select(_FIELDS.c.dataset_id, _FIELDS.c.name)
                .where(_FIELDS.c.dataset_id.in_(dataset_ids))
                .order_by(_FIELDS.c.dataset_id, _FIELDS.c.position)
            ).all():
                fields.setdefault(dataset_id, []).append(field_name)
        frozen_fields = {dataset_id: tuple(names) for dataset_id, names in fields.items()}
        yield [
            _JobSource(
                job_id=job_id,
                namespace=namespace,
                name=name,
                sql=sql,
                dialect=dialect,
                declared=tuple(declared.get(job_id, ())),
                fields=frozen_fields,
            )
            for job_id, namespace, name, sql, dialect in jobs
        ]
        after = ids[-1]


def _lock_organization(session: Session, organization_id: int) -> None:
    """Hold the organization's derivation lock until this transaction ends.

    PostgreSQL: a transaction-level advisory lock. SQLite has one writer at a time: a no-op write takes
    the database's write lock for the transaction, to the same effect.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:key, :organization_id)"),
            {"key": _LOCK_KEY, "organization_id": organization_id},
        )
    else:
        session.execute(
            _DERIVATIONS.update().where(_DERIVATIONS.c.job_id == -1).values(status=_DERIVATIONS.c.status)
        )


def _store(
    session: Session, organization_id: int, results: Sequence[tuple[_JobSource, str, Derivation]]
) -> int:
    """Replace the derived rows and outcomes of a page's jobs with theirs. Returns the edges written.

    A handful of statements per page, whatever its number of jobs: the jobs' earlier rows are deleted,
    then every new row of a table goes in one executemany. Datasets the SQL names for jobs that
    declared none are created in one sorted call, in the order ingest creates them (no lock cycle).
    """
    if not results:
        return 0
    job_ids = [source.job_id for source, _, _ in results]
    for table in (_DERIVED_LINEAGE, _DERIVED_LINKS, _DERIVATIONS):
        session.execute(delete(table).where(table.c.job_id.in_(job_ids)))
    now = utcnow()
    undeclared = sorted(
        {
            key
            for source, _, derivation in results
            if not source.declared
            for key in (*derivation.inputs, *derivation.outputs)
        }
    )
    created: dict[tuple[str, str], int] = {}
    if undeclared:
        dialect = session.get_bind().dialect.name
        rows_by_key = ensure_datasets(session, dialect, organization_id, undeclared, now)
        created = {key: row.id for key, row in rows_by_key.items()}
    lineage_rows: list[dict[str, Any]] = []
    link_rows: list[dict[str, Any]] = []
    outcomes: list[dict[str, Any]] = []
    for source, fingerprint, derivation in results:
        dataset_ids = {(d.namespace, d.name): d.dataset_id for d in source.declared}
        if not source.declared:
            # The producer declared no datasets: the SQL's tables become the job's inputs/outputs.
            dataset_ids.update({key: created[key] for key in (*derivation.inputs, *derivation.outputs)})
            link_rows.extend(
                {
                    "job_id": source.job_id,
                    "direction": direction,
                    "position": position,
                    "dataset_id": dataset_ids[key],
                }
                for direction, keys in (("input", derivation.inputs), ("output", derivation.outputs))
                for position, key in enumerate(dict.fromkeys(keys))
            )
        rows = _edge_rows(source.job_id, derivation.edges, dataset_ids)
        lineage_rows.extend(rows)
        outcomes.append(
            {
                "job_id": source.job_id,
                "organization_id": organization_id,
                "source_fingerprint": fingerprint,
                "status": derivation.status,
                "edges": len(rows),
                "problems": orjson.dumps(list(derivation.problems)).decode() if derivation.problems else None,
                "unmatched_tables": (
                    orjson.dumps(list(derivation.unmatched_tables)).decode()
                    if derivation.unmatched_tables
                    else None
                ),
                "derived_at": now,
            }
        )
    if link_rows:
        session.execute(insert(_DERIVED_LINKS), link_rows)
    if lineage_rows:
        session.execute(insert(_DERIVED_LINEAGE), lineage_rows)
    session.execute(insert(_DERIVATIONS), outcomes)
    return len(lineage_rows)


def _edge_rows(
    job_id: int, edges: Sequence[DerivedEdge], dataset_ids: dict[tuple[str, str], int]
) -> list[dict[str, Any]]:
    """The derived table's rows: one per edge, edges of the same input field next to each other.

    Rows are grouped as the reported table's are (output dataset, output field, input index), so the
    graph read turns both into the facet's shape with the same code. Edges naming a dataset the job
    does not have (the engine reports those as unmatched) are left out.
    """
    grouped: dict[tuple[int, str | None], dict[tuple[int, str], list[DerivedEdge]]] = {}
    for edge in edges:
        output_id = dataset_ids.get((edge.output_namespace, edge.output_name))
        input_id = dataset_ids.get((edge.input_namespace, edge.input_name))
        if output_id is None or input_id is None:
            continue
        per_output = grouped.setdefault((output_id, edge.output_field), {})
        per_output.setdefault((input_id, edge.input_field), []).append(edge)
    rows: list[dict[str, Any]] = []
    for (output_id, output_field), inputs in grouped.items():
        for input_index, ((input_id, input_field), input_edges) in enumerate(inputs.items()):
            for edge in input_edges:
                rows.append(
                    {
                        "job_id": job_id,
                        "position": len(rows),
                        "output_dataset_id": output_id,
                        "output_field": output_field,
                        "input_index": input_index,
                        "input_dataset_id": input_id,
                        "input_field": input_field,
                        "transformation_type": edge.type,
                        "transformation_subtype": edge.subtype,
                        "masking": edge.masking,
                        "transformation_description": edge.description,
                    }
                )
    return rows


def _drop_derivations_without_sql(session: Session, organization_id: int) -> int:
    """Forget what was derived for jobs whose SQL facet has since been deleted."""
    without_sql = select(_JOBS.c.id).where(_JOBS.c.organization_id == organization_id, _JOBS.c.sql.is_(None))
    stale = [
        row[0]
        for row in session.execute(
            select(_DERIVATIONS.c.job_id).where(
                _DERIVATIONS.c.organization_id == organization_id, _DERIVATIONS.c.job_id.in_(without_sql)
            )
        ).all()
    ]
    if stale:
        for table in (_DERIVED_LINEAGE, _DERIVED_LINKS, _DERIVATIONS):
            session.execute(delete(table).where(table.c.job_id.in_(stale)))
    return len(stale)
