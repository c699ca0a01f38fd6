"""Import a file of events in several processes: each checks and stores whole batches.

Checking and merging a batch is Python work that holds one core, and the database does its part while
the process waits, so one process leaves a machine's other cores idle. Here the file is still read once,
by the calling process, in batches (:func:`importer.iter_batches`); each batch goes to one of
``workers`` processes, which checks its lines and stores it in its own transaction
(:func:`importer.import_batch`).

The graph is the same as a serial import's: every part of it is last-writer-wins under a total order,
so batches applied in any order give one result (``tests/test_batch_merge.py``). Two batches that name
the same jobs or datasets lock them in the same key order, and a deadlock is retried. What can differ:
a count (an event a serial import would report as "unchanged" after an identical one in an earlier
batch may be counted as the one that replaced it), and the order of new jobs' ids, which the export
follows: by batch as the batches were stored, rather than by line.

Rejected lines are reported in line order: batches are taken in the order they were sent. At most two
batches per process are in flight, so memory stays bounded whatever the file's size. A database failure
stops the import (the batches already sent may or may not be stored; importing again is harmless), as
does a worker that dies (:class:`WorkerDiedError`). Ctrl-C stops the import after the batches being
stored: the workers ignore it, so no batch is cut short. Workers are forked (Linux, the product's
platform).
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import BinaryIO

from sqlalchemy.orm import Session

from lineage_core.infra.db import get_engine
from lineage_core.lineage.importer import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_EVENTS,
    DEFAULT_MAX_EVENT_BYTES,
    BatchReport,
    ImportReport,
    Line,
    Reject,
    add_batch,
    import_batch,
    iter_batches,
)

IN_FLIGHT_PER_WORKER = 2


class WorkerDiedError(RuntimeError):
    """A worker process ended without answering (killed, out of memory); the import stopped."""


# One worker process's session (set by _start_worker in each process of the pool).
_session: Session | None = None


def _start_worker(database_url: str) -> None:
    # Ctrl-C reaches the whole process group; the importing process stops sending batches, and a
    # worker finishes the one it stores rather than dying in the middle of it with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _session
    engine = get_engine(database_url)
    # Forked from the importing process: its pooled connections belong to the parent; open new ones.
    engine.dispose(close=False)
    _session = Session(bind=engine, expire_on_commit=False)


def _import_in_worker(organization_id: int, lines: list[Line], max_event_bytes: int) -> BatchReport:
    assert _session is not None  # set by the pool's initializer
    return import_batch(_session, organization_id, lines, max_event_bytes)


def import_events_in_parallel(
    database_url: str,
    organization_id: int,
    stream: BinaryIO,
    *,
    workers: int,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    batch_events: int = DEFAULT_BATCH_EVENTS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    on_progress: Callable[[int], None] = lambda _bytes: None,
    on_reject: Callable[[Reject], None] = lambda _reject: None,
) -> ImportReport:
    """Like :func:`importer.import_events`, with ``workers`` processes storing batches at once.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed (re-raised from the worker that met it).
    """
    report = ImportReport()
    batches = iter_batches(
        stream,
        max_event_bytes=max_event_bytes,
        batch_events=batch_events,
        batch_bytes=batch_bytes,
        on_progress=on_progress,
    )
    in_flight: deque[tuple[Future[BatchReport], int]] = deque()

    def take_oldest() -> None:
        future, lines = in_flight.popleft()
        try:
            batch = future.result()
        except BrokenProcessPool as error:
            raise WorkerDiedError(
                "An import worker process ended without answering (killed, or out of memory); "
                "the batches it had may not be stored. Import the file again: repeats change nothing."
            ) from error
        add_batch(report, batch, lines, on_reject)

    # fork: the workers start with the modules this process has loaded (spawning would import them
    # again in each one); they open their own database connections.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(database_url,)
    ) as pool:
        try:
            for lines in batches:
                if len(in_flight) >= workers * IN_FLIGHT_PER_WORKER:
                    take_oldest()
                future = pool.submit(_import_in_worker, organization_id, lines, max_event_bytes)
                in_flight.append((future, len(lines)))
            while in_flight:
                take_oldest()
        except BaseException:
            for future, _lines in in_flight:
                future.cancel()
            raise
    return report
