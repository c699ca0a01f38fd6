"""The set-based batch merge gives the graph of applying the events one by one, in any order.

Random streams of events over a few jobs and datasets (late and duplicate events, equal eventTimes,
FAIL/ABORT, JobEvents and DatasetEvents, ``_deleted`` facets, jobs sharing datasets, a dataset listed
twice or as input and output, keys that differ only in case or namespace, and now and then an event
the database refuses) are stored four ways on real PostgreSQL, each into an organization of its own,
and every row the merge writes must be equal:

- one by one in stream order with the per-event merge (``merge.apply_event``, the reference);
- in random batches with the set-based merge (``ingest.store_batch``);
- shuffled, one by one (batches of one);
- shuffled, as one batch.

The per-event answers of a batch are compared with the reference's answers too: a batch answers for
each event what applying the batch's events in their order would have answered. Jobs get their ids in
the order the events first name them (the export's order), a batch creates no dataset the events one
by one would not have, and it moves ``updated_at`` (what the derivation looks for) of every job and
dataset whose content it changed.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.lineage.event import Event
from lineage_core.lineage.ingest import Refused, store_batch
from lineage_core.lineage.merge import ApplyResult, apply_event
from lineage_core.lineage.parse import check_event
from tests.db_refusals import POISON, refusing_jobs_named_poison
from tests.factories import (
    PG,
    PRODUCER,
    column_lineage,
    dataset,
    documentation,
    facet,
    input_field,
    make_org,
    run_event,
    schema,
    transformation,
)
from tests.test_lineage_merge import NOW

# Jobs and datasets that differ only in case or in namespace: distinct keys everywhere.
JOBS = (("airflow-prod", "job_a"), ("airflow-prod", "JOB_A"), ("dbt", "job_a"))
S3 = "s3://bucket"
DATASETS = ((PG, "d0"), (PG, "D0"), (S3, "d0"), (PG, "d1"))
# Few distinct times, so that equal eventTimes (and the tie-breaks) are common; one instant also
# written with another UTC offset.
TIMES = (
    "2024-05-01T00:00:00Z",
    "2024-05-01T00:00:01Z",
    "2024-05-01T02:00:01+02:00",
    "2024-05-01T00:00:02Z",
    "2024-05-02T00:00:00Z",
)
DELETED = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/x.json", "_deleted": True}
REFUSED = "refused"  # what the database answered for an event it refused (a job called "poison")
# A stored row's updated_at before each batch, so that the test sees which rows the batch touched
# without reading the clock.
UNTOUCHED = datetime(2000, 1, 1, tzinfo=UTC)

schemas = st.one_of(
    st.none(),
    st.just(DELETED),
    st.sampled_from(
        [(), (("id", "INT"),), (("id", "INT"), ("name", "TEXT")), (("id", "BIGINT", "The id"),)]
    ).map(lambda fields: schema(*fields)),
)
docs = st.one_of(st.none(), st.just(DELETED), st.sampled_from(["Raw.", "Cleaned.", ""]).map(documentation))


@st.composite
def datasets(draw: st.DrawFn, output: bool) -> dict[str, Any]:
    namespace, name = draw(st.sampled_from(DATASETS))
    facets: dict[str, Any] = {}
    if (value := draw(schemas)) is not None:
        facets["schema"] = value
    if (value := draw(docs)) is not None:
        facets["documentation"] = value
    if output and draw(st.booleans()):
        source_ns, source = draw(st.sampled_from(DATASETS))
        facets["columnLineage"] = column_lineage(
            {"id": [input_field(source, "id", transformation(), namespace=source_ns)]},
            dataset=draw(
                st.sampled_from(
                    [[], [input_field(source, "id", transformation("INDIRECT", "JOIN"), namespace=source_ns)]]
                )
            ),
        )
    return dataset(name, namespace, **facets)


@st.composite
def events(draw: st.DrawFn, jobs: tuple[tuple[str, str], ...] = JOBS) -> dict[str, Any]:
    kind = draw(st.sampled_from(["RunEvent", "RunEvent", "RunEvent", "JobEvent", "DatasetEvent"]))
    time = draw(st.sampled_from(TIMES))
    if kind == "DatasetEvent":
        return {
            "eventTime": time,
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
            "dataset": draw(datasets(output=False)),
        }
    job_facets: dict[str, Any] = {}
    if draw(st.booleans()):
        job_facets["sql"] = draw(
            st.sampled_from(
                [DELETED, facet({"query": "SELECT 1"}), facet({"query": "SELECT 2", "dialect": "x"})]
            )
        )
    if draw(st.booleans()):
        job_facets["documentation"] = draw(
            st.sampled_from([DELETED, facet({"description": "Daily."}), facet({"description": ""})])
        )
    if draw(st.booleans()):
        job_facets["jobType"] = draw(
            st.sampled_from(
                [DELETED, *(facet({"processingType": "BATCH", "integration": name}) for name in "AB")]
            )
        )
    namespace, job = draw(st.sampled_from(jobs))
    event = run_event(
        job=job,
        namespace=namespace,
        event_type=draw(st.sampled_from(["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER", None])),
        time=time,
        inputs=draw(st.lists(datasets(output=False), max_size=3)),
        outputs=draw(st.lists(datasets(output=True), max_size=2)),
        job_facets=job_facets,
        run_id="0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e",
    )
    if kind == "JobEvent":
        event.pop("run")
        event.pop("eventType", None)
        event["schemaURL"] = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
    return event


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    stream = draw(st.lists(events(), min_size=1, max_size=25))
    # Duplicates, later in the stream.
    for index in draw(st.lists(st.integers(0, len(stream) - 1), max_size=4)):
        stream.append(stream[index])
    # Now and then an event the database refuses (its job's name), anywhere: its neighbours are stored.
    for _ in range(draw(st.integers(0, 1))):
        stream.insert(draw(st.integers(0, len(stream))), draw(events(jobs=(("airflow-prod", POISON),))))
    return stream


def _rows(db: Session, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in db.execute(text(statement), params)]


def graph_dump(db: Session, organization_id: int) -> dict[str, Any]:
    """Every row the merge writes for the organization, by names instead of ids (and without times of
    writing: created_at, updated_at, which :func:`assert_touched_rows_changed` checks).

    ``job_order`` is the order of the jobs' ids (the order in which the export lists them).
    ``datasets`` leaves out the datasets that carry no facet and that no job refers to: applying events
    one by one leaves one behind for each lineage that a newer event replaced later (it was created
    then), so which of them exist depends on the order in which the events came; ``all_datasets`` has
    them all (with their description).
    """
    params = {"org": organization_id}
    jobs = _rows(
        db,
        "SELECT namespace, name, description, sql, sql_dialect, processing_type, integration, job_type, "
        "lineage_event_time, lineage_version, documentation_version, sql_version, job_type_version "
        "FROM lineage_jobs WHERE organization_id = :org ORDER BY namespace, name",
        params,
    )
    job_order = _rows(
        db, "SELECT namespace, name FROM lineage_jobs WHERE organization_id = :org ORDER BY id", params
    )
    links = _rows(
        db,
        "SELECT j.namespace, j.name, l.direction, l.position, d.namespace, d.name "
        "FROM lineage_job_datasets l "
        "JOIN lineage_jobs j ON j.id = l.job_id JOIN lineage_datasets d ON d.id = l.dataset_id "
        "WHERE j.organization_id = :org AND d.organization_id = :org ORDER BY 1, 2, 3, 4",
        params,
    )
    edges = _rows(
        db,
        "SELECT j.namespace, j.name, c.position, o.namespace, o.name, c.output_field, c.input_index, "
        "i.namespace, i.name, c.input_field, c.transformation_type, c.transformation_subtype, c.masking, "
        "c.transformation_description "
        "FROM lineage_column_lineage c JOIN lineage_jobs j ON j.id = c.job_id "
        "JOIN lineage_datasets o ON o.id = c.output_dataset_id AND o.organization_id = :org "
        "JOIN lineage_datasets i ON i.id = c.input_dataset_id AND i.organization_id = :org "
        "WHERE j.organization_id = :org ORDER BY 1, 2, 3",
        params,
    )
    edge_count = db.scalar(
        text(
            "SELECT count(*) FROM lineage_column_lineage c JOIN lineage_jobs j ON j.id = c.job_id "
            "WHERE j.organization_id = :org"
        ),
        params,
    )
    assert edge_count == len(edges), "column lineage refers to a dataset of no row of this organization"
    kept = (
        "d.organization_id = :org AND (d.schema_version IS NOT NULL OR d.documentation_version IS NOT NULL "
        "OR EXISTS (SELECT 1 FROM lineage_job_datasets l WHERE l.dataset_id = d.id) "
        "OR EXISTS (SELECT 1 FROM lineage_column_lineage c JOIN lineage_jobs j ON j.id = c.job_id "
        "WHERE j.organization_id = :org AND d.id IN (c.output_dataset_id, c.input_dataset_id)))"
    )
    datasets_ = _rows(
        db,
        "SELECT namespace, name, description, schema_version, documentation_version "  # noqa: S608
        f"FROM lineage_datasets d WHERE {kept} ORDER BY namespace, name",
        params,
    )
    all_datasets = _rows(
        db, "SELECT namespace, name, description FROM lineage_datasets WHERE organization_id = :org", params
    )
    fields = _rows(
        db,
        "SELECT d.namespace, d.name, f.position, f.name, f.type, f.description FROM lineage_dataset_fields f "
        "JOIN lineage_datasets d ON d.id = f.dataset_id WHERE d.organization_id = :org ORDER BY 1, 2, 3",
        params,
    )
    db.rollback()
    return {
        "jobs": jobs,
        "job_order": job_order,
        "links": links,
        "edges": edges,
        "datasets": datasets_,
        "all_datasets": {(ns, name): description for ns, name, description in all_datasets},
        "fields": fields,
    }


def comparable(dump: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the order of the events."""
    return {key: value for key, value in dump.items() if key not in ("job_order", "all_datasets")}


def contents(dump: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
    """Per job and dataset, its content (not the versions): what a reader sees of it."""
    result: dict[tuple[str, str, str], Any] = {}
    for row in dump["jobs"]:
        result[("job", row[0], row[1])] = [row[2:8]]
    for (ns, name), description in dump["all_datasets"].items():
        result[("dataset", ns, name)] = [description]
    for table, kind in (("links", "job"), ("edges", "job"), ("fields", "dataset")):
        for row in dump[table]:
            result[(kind, row[0], row[1])].append((table, row[2:]))
    return result


def untouch(db: Session, organization_id: int) -> None:
    params = {"org": organization_id, "untouched": UNTOUCHED}
    for table in ("lineage_jobs", "lineage_datasets"):
        db.execute(text(f"UPDATE {table} SET updated_at = :untouched WHERE organization_id = :org"), params)  # noqa: S608
    db.commit()


def touched(db: Session, organization_id: int) -> set[tuple[str, str, str]]:
    params = {"org": organization_id, "untouched": UNTOUCHED}
    rows = _rows(
        db,
        "SELECT 'job', namespace, name FROM lineage_jobs "
        "WHERE organization_id = :org AND updated_at <> :untouched "
        "UNION ALL SELECT 'dataset', namespace, name FROM lineage_datasets "
        "WHERE organization_id = :org AND updated_at <> :untouched",
        params,
    )
    db.rollback()
    return {(kind, ns, name) for kind, ns, name in rows}


def assert_touched_rows_changed(
    db: Session, organization_id: int, before: dict[str, Any], batch: list[Event], results: list[Any]
) -> None:
    """A batch moves updated_at (what the derivation looks for) of every job and dataset whose content
    it changed, and of a job it did not create only when one of the batch's events answered a change."""
    old, new = contents(before), contents(graph_dump(db, organization_id))
    changed = {key for key, content in new.items() if old.get(key) != content}
    moved = touched(db, organization_id)
    assert changed <= moved, changed - moved
    claimed = {
        ("job", event.job.namespace, event.job.name)
        for event, result in zip(batch, results, strict=True)
        if event.job is not None and isinstance(result, ApplyResult) and result.changed
    }
    jobs_moved = {key for key in moved if key[0] == "job" and key in old}
    assert jobs_moved <= claimed, jobs_moved - claimed


def new_org_id(db: Session) -> int:
    return make_org(db, f"org-{uuid.uuid4().hex[:12]}").id


def reference(db: Session, stream: list[Event]) -> tuple[int, list[Any]]:
    """The stream applied with the per-event merge, one transaction per event."""
    organization_id = new_org_id(db)
    results: list[Any] = []
    for event in stream:
        try:
            results.append(apply_event(db, organization_id, event))
            db.commit()
        except IntegrityError:
            db.rollback()
            results.append(REFUSED)
    return organization_id, results


def in_batches(
    db: Session, stream: list[Event], cuts: list[int], *, check_touched: bool = False
) -> tuple[int, list[Any]]:
    organization_id = new_org_id(db)
    results: list[Any] = []
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for start, end in itertools.pairwise(bounds):
        if start < end:
            if check_touched:
                untouch(db, organization_id)
                before = graph_dump(db, organization_id)
            answers = store_batch(db, organization_id, stream[start:end])
            if check_touched:
                assert_touched_rows_changed(db, organization_id, before, stream[start:end], answers)
            results.extend(REFUSED if isinstance(answer, Refused) else answer for answer in answers)
    return organization_id, results


@pytest.fixture
def poison_trigger(settings: Settings) -> Iterator[None]:
    with refusing_jobs_named_poison(settings.database_url):
        yield


@hypothesis_settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    raw=streams(),
    cuts=st.lists(st.integers(0, 30), max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_batches_in_any_order_give_the_graph_of_one_by_one(
    db: Session, poison_trigger: None, raw: list[dict[str, Any]], cuts: list[int], seed: int
) -> None:
    stream = [check_event(event, now=NOW) for event in raw]
    expected_org, expected_results = reference(db, stream)
    expected = graph_dump(db, expected_org)

    batched_org, batched_results = in_batches(db, stream, cuts, check_touched=True)
    batched = graph_dump(db, batched_org)
    assert comparable(batched) == comparable(expected)
    # The jobs were created in the order the events named them: the export lists them in that order.
    assert batched["job_order"] == expected["job_order"]
    # No dataset the events one by one would not have created.
    assert batched["all_datasets"].items() <= expected["all_datasets"].items()
    # Each batch answers what the events did in their order: the same as the reference's answers.
    assert batched_results == expected_results

    shuffled = list(stream)
    random.Random(seed).shuffle(shuffled)
    one_by_one_org, one_by_one_results = in_batches(db, shuffled, list(range(len(shuffled))))
    one_by_one = graph_dump(db, one_by_one_org)
    assert comparable(one_by_one) == comparable(expected)
    one_batch_org, one_batch_results = in_batches(db, shuffled, [])
    one_batch = graph_dump(db, one_batch_org)
    assert comparable(one_batch) == comparable(expected)
    assert one_batch["job_order"] == one_by_one["job_order"]
    assert one_batch["all_datasets"].items() <= one_by_one["all_datasets"].items()
    assert one_batch_results == one_by_one_results


def test_a_losing_lineage_still_sets_its_datasets_facets_and_creates_nothing_else(db: Session) -> None:
    """A late event's lineage loses to the batch's newer one; the schema it carries for its input is an
    independent part and is stored all the same, while the datasets only its lineage named are not
    created (nothing would refer to them)."""
    newer = run_event(job="j", time="2024-05-02T00:00:00Z", inputs=[dataset("a")], outputs=[dataset("b")])
    late = run_event(
        job="j",
        time="2024-05-01T00:00:00Z",
        inputs=[dataset("a_schema", schema=schema(("id", "INT")))],
        outputs=[dataset("only_in_late")],
    )
    answers: list[list[tuple[str, int]]] = []
    for order in ([newer, late], [late, newer]):
        stream = [check_event(event, now=NOW) for event in order]
        expected_org, expected_results = reference(db, stream)
        batched_org, batched_results = in_batches(db, stream, [])
        assert batched_results == expected_results
        batched, expected = graph_dump(db, batched_org), graph_dump(db, expected_org)
        assert comparable(batched) == comparable(expected)
        assert [row[2:] for row in batched["links"]] == [("input", 0, PG, "a"), ("output", 0, PG, "b")]
        assert batched["fields"] == [(PG, "a_schema", 0, "id", "INT", None)]
        assert set(batched["all_datasets"]) == {(PG, "a"), (PG, "b"), (PG, "a_schema")}
        answers.append([(r.lineage.value, r.dataset_facets) for r in batched_results])
    # After the newer event the late one is stale, and still counts the schema it set.
    assert answers == [[("replaced", 0), ("stale", 1)], [("replaced", 1), ("replaced", 0)]]
