"""The set-based batch merge gives the graph of applying the events one by one, in any order.

Random streams of events over a few jobs and datasets (late and duplicate events, equal eventTimes,
FAIL/ABORT, JobEvents and DatasetEvents, ``_deleted`` facets, jobs sharing datasets) are stored four
ways on real PostgreSQL, each into an organization of its own, and the stored graphs must be equal:

- one by one in stream order with the per-event merge (``merge.apply_event``, the reference);
- in random batches with the set-based merge (``ingest.store_batch``);
- shuffled, one by one (batches of one);
- shuffled, as one batch.

The per-event answers of a batch are compared with the reference's answers too: a batch answers for
each event what applying the batch's events in their order would have answered.
"""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.orm import Session

from lineage_core.lineage.event import Event
from lineage_core.lineage.ingest import store_batch
from lineage_core.lineage.merge import ApplyResult, apply_event
from lineage_core.lineage.parse import check_event
from tests.factories import (
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

JOBS = ("job_a", "job_b", "job_c")
DATASETS = ("d0", "d1", "d2", "d3")
# Few distinct times, so that equal eventTimes (and the tie-breaks) are common.
TIMES = ("2024-05-01T00:00:00Z", "2024-05-01T00:00:01Z", "2024-05-01T00:00:02Z", "2024-05-02T00:00:00Z")
DELETED = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/x.json", "_deleted": True}

schemas = st.one_of(
    st.none(),
    st.just(DELETED),
    st.sampled_from([(("id", "INT"),), (("id", "INT"), ("name", "TEXT")), (("id", "BIGINT", "The id"),)]).map(
        lambda fields: schema(*fields)
    ),
)
docs = st.one_of(st.none(), st.just(DELETED), st.sampled_from(["Raw.", "Cleaned.", ""]).map(documentation))


@st.composite
def datasets(draw: st.DrawFn, output: bool) -> dict[str, Any]:
    name = draw(st.sampled_from(DATASETS))
    facets: dict[str, Any] = {}
    if (value := draw(schemas)) is not None:
        facets["schema"] = value
    if (value := draw(docs)) is not None:
        facets["documentation"] = value
    if output and draw(st.booleans()):
        source = draw(st.sampled_from(DATASETS))
        facets["columnLineage"] = column_lineage(
            {"id": [input_field(source, "id", transformation())]},
            dataset=draw(
                st.sampled_from([[], [input_field(source, "id", transformation("INDIRECT", "JOIN"))]])
            ),
        )
    return dataset(name, **facets)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
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
        job_facets["documentation"] = draw(st.sampled_from([DELETED, facet({"description": "Daily."})]))
    if draw(st.booleans()):
        job_facets["jobType"] = facet({"processingType": "BATCH", "integration": draw(st.sampled_from("AB"))})
    event = run_event(
        job=draw(st.sampled_from(JOBS)),
        event_type=draw(st.sampled_from(["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"])),
        time=time,
        inputs=draw(st.lists(datasets(output=False), max_size=3)),
        outputs=draw(st.lists(datasets(output=True), max_size=2)),
        job_facets=job_facets,
        run_id="0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e",
    )
    if kind == "JobEvent":
        event.pop("run")
        event.pop("eventType")
        event["schemaURL"] = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
    return event


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    stream = draw(st.lists(events(), min_size=1, max_size=25))
    # Duplicates, later in the stream.
    for index in draw(st.lists(st.integers(0, len(stream) - 1), max_size=4)):
        stream.append(stream[index])
    return stream


def graph_dump(db: Session, organization_id: int) -> dict[str, Any]:
    """Every stored row of the organization, by names instead of ids.

    Datasets that carry no facet and that no job refers to are left out: applying events one by one
    leaves one behind for each lineage that a newer event replaced later (it was created then), so
    which of them exist depends on the order in which the events came.
    """
    params = {"org": organization_id}
    jobs = db.execute(
        text(
            "SELECT namespace, name, description, sql, sql_dialect, processing_type, integration, job_type, "
            "lineage_event_time, lineage_version, documentation_version, sql_version, job_type_version "
            "FROM lineage_jobs WHERE organization_id = :org ORDER BY namespace, name"
        ),
        params,
    ).all()
    links = db.execute(
        text(
            "SELECT j.name, l.direction, l.position, d.namespace, d.name FROM lineage_job_datasets l "
            "JOIN lineage_jobs j ON j.id = l.job_id JOIN lineage_datasets d ON d.id = l.dataset_id "
            "WHERE j.organization_id = :org ORDER BY 1, 2, 3"
        ),
        params,
    ).all()
    edges = db.execute(
        text(
            "SELECT j.name, c.position, o.name, c.output_field, c.input_index, i.name, c.input_field, "
            "c.transformation_type, c.transformation_subtype, c.masking, c.transformation_description "
            "FROM lineage_column_lineage c JOIN lineage_jobs j ON j.id = c.job_id "
            "JOIN lineage_datasets o ON o.id = c.output_dataset_id "
            "JOIN lineage_datasets i ON i.id = c.input_dataset_id "
            "WHERE j.organization_id = :org ORDER BY 1, 2"
        ),
        params,
    ).all()
    kept = (
        "d.organization_id = :org AND (d.schema_version IS NOT NULL OR d.documentation_version IS NOT NULL "
        "OR EXISTS (SELECT 1 FROM lineage_job_datasets l WHERE l.dataset_id = d.id) "
        "OR EXISTS (SELECT 1 FROM lineage_column_lineage c JOIN lineage_jobs j ON j.id = c.job_id "
        "WHERE j.organization_id = :org AND d.id IN (c.output_dataset_id, c.input_dataset_id)))"
    )
    datasets_ = db.execute(
        text(
            "SELECT namespace, name, description, schema_version, documentation_version "  # noqa: S608
            f"FROM lineage_datasets d WHERE {kept} ORDER BY namespace, name"
        ),
        params,
    ).all()
    fields = db.execute(
        text(
            "SELECT d.name, f.position, f.name, f.type, f.description FROM lineage_dataset_fields f "
            "JOIN lineage_datasets d ON d.id = f.dataset_id WHERE d.organization_id = :org ORDER BY 1, 2"
        ),
        params,
    ).all()
    db.rollback()
    return {
        "jobs": [tuple(r) for r in jobs],
        "links": [tuple(r) for r in links],
        "edges": [tuple(r) for r in edges],
        "datasets": [tuple(r) for r in datasets_],
        "fields": [tuple(r) for r in fields],
    }


def new_org_id(db: Session) -> int:
    return make_org(db, f"org-{uuid.uuid4().hex[:12]}").id


def reference(db: Session, stream: list[Event]) -> tuple[int, list[ApplyResult]]:
    """The stream applied with the per-event merge, one transaction per event."""
    organization_id = new_org_id(db)
    results = []
    for event in stream:
        results.append(apply_event(db, organization_id, event))
        db.commit()
    return organization_id, results


def in_batches(db: Session, stream: list[Event], cuts: list[int]) -> tuple[int, list[Any]]:
    organization_id = new_org_id(db)
    results: list[Any] = []
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for start, end in itertools.pairwise(bounds):
        if start < end:
            results.extend(store_batch(db, organization_id, stream[start:end]))
    return organization_id, results


@hypothesis_settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    raw=streams(),
    cuts=st.lists(st.integers(0, 30), max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_batches_in_any_order_give_the_graph_of_one_by_one(
    db: Session, raw: list[dict[str, Any]], cuts: list[int], seed: int
) -> None:
    stream = [check_event(event, now=NOW) for event in raw]
    expected_org, expected_results = reference(db, stream)
    expected = graph_dump(db, expected_org)

    batched_org, batched_results = in_batches(db, stream, cuts)
    assert graph_dump(db, batched_org) == expected
    # Each batch answers what the events did in their order: the same as the reference's answers.
    assert batched_results == expected_results

    shuffled = list(stream)
    random.Random(seed).shuffle(shuffled)
    one_by_one_org, _ = in_batches(db, shuffled, list(range(len(shuffled))))
    assert graph_dump(db, one_by_one_org) == expected
    one_batch_org, _ = in_batches(db, shuffled, [])
    assert graph_dump(db, one_batch_org) == expected
