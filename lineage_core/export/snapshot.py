"""Reading the organization's graph for an export: one instant of the database, in bounded memory."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import closing, contextmanager

from sqlalchemy.orm import Session

from lineage_core.export.events import EventWriter
from lineage_core.infra.db import session_factory
from lineage_core.lineage.graph import iter_org_graph_for_export

GRAPH_BATCH_SIZE = 500
# Objects allocated between two runs of the cyclic garbage collector while a snapshot is generated.
GENERATION_GC_THRESHOLD = 50_000


@contextmanager
def snapshot_session(database_url: str) -> Iterator[Session]:
    """A session whose reads all see one instant of the database: REPEATABLE READ, read-only.

    On PostgreSQL a single transaction at REPEATABLE READ sees a snapshot taken at its first query, so
    every job of the export is as of the same instant however long the export takes. SQLite has one
    writer and no such level; there the reads see what is committed as they run.
    """
    session = session_factory(database_url)()
    try:
        if session.get_bind().dialect.name == "postgresql":
            session.connection(
                execution_options={"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
            )
        yield session
    finally:
        session.rollback()  # read-only: nothing to commit; end the transaction before the pool takes it
        session.close()


def write_snapshot_lines(session: Session, organization_id: int, writer: EventWriter) -> Iterator[bytes]:
    """The NDJSON lines of the organization's current graph, read through ``session``, in bounded memory.

    Closing these lines closes the graph read at once (on PostgreSQL it stops the thread that fetches
    the next page, see :func:`~lineage_core.lineage.graph.iter_org_graph_for_export`).
    """
    with (
        fewer_collections(),
        closing(iter_org_graph_for_export(session, organization_id, batch_size=GRAPH_BATCH_SIZE)) as jobs,
    ):
        yield from writer.lines(jobs)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Let the cyclic garbage collector run less often while a snapshot is generated.

    Generation allocates a few hundred short-lived dicts, lists and tuples per job, none of them in a
    reference cycle, so reference counting frees every one; at Python's default threshold (700
    allocations) the collector still ran every few jobs, for about a third of generation's CPU time
    (measured at 10k jobs). The memory this could hold back is one page of jobs. Restored afterwards.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(GENERATION_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
