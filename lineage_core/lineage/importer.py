"""Import a newline-delimited file of OpenLineage events (one JSON event per line) of any size.

The file is read line by line and an over-long line is skipped in chunks, never held whole. Lines are
grouped in batches of up to ``batch_events`` lines or ``batch_bytes`` bytes (:func:`iter_batches`); in
each batch every line is checked like a request to the ingest API and the good ones are stored exactly
like a request to the batch endpoint (:func:`import_batch`, :func:`lineage_core.lineage.ingest.store_batch`:
one transaction and one set-based merge per batch on PostgreSQL). So memory stays bounded by a batch, a
bad line is rejected alone, and the import of the same file can be repeated safely (it changes nothing
the second time). :mod:`lineage_core.lineage.parallel_import` imports the batches in several processes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from sqlalchemy.orm import Session

from lineage_core.lineage.event import Event
from lineage_core.lineage.ingest import Refused, store_batch
from lineage_core.lineage.merge import LineageOutcome
from lineage_core.lineage.parse import EventError, Problem, parse_event

DEFAULT_MAX_EVENT_BYTES = 5 * 1024 * 1024
# The batch endpoint's defaults: the same unit of work whichever way the events come in.
DEFAULT_BATCH_EVENTS = 1000
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Reject:
    """A line that was not imported, with every problem found in it."""

    line: int  # 1-based
    problems: tuple[Problem, ...]

    def describe(self) -> str:
        return f"line {self.line}: " + "; ".join(f"{p.field}: {p.message}" for p in self.problems)


@dataclass(slots=True)
class ImportReport:
    lines: int = 0  # non-blank lines read
    stored: int = 0  # accepted events (including repeats and stale ones: accepted, nothing to change)
    rejected: int = 0
    lineage: Counter[LineageOutcome] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    content: bytes | None  # None: longer than the limit
    size: int  # bytes consumed from the file, newline included


def _iter_lines(stream: BinaryIO, max_bytes: int) -> Iterator[Line]:
    number = 0
    while True:
        chunk = stream.readline(max_bytes + 2)  # + "\r\n"
        if not chunk:
            return
        number += 1
        size = len(chunk)
        if chunk.endswith(b"\n") or len(chunk) <= max_bytes:
            yield Line(number, chunk.rstrip(b"\r\n"), size)
            continue
        # Too long: consume the rest of the line without keeping it.
        while not chunk.endswith(b"\n"):
            chunk = stream.readline(_SKIP_CHUNK)
            if not chunk:
                break
            size += len(chunk)
        yield Line(number, None, size)


@dataclass(slots=True)
class BatchReport:
    """What one batch of lines did: counts, and its rejected lines in line order."""

    stored: int = 0
    lineage: Counter[LineageOutcome] = field(default_factory=Counter)
    rejects: list[Reject] = field(default_factory=list)


def iter_batches(
    stream: BinaryIO,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    batch_events: int = DEFAULT_BATCH_EVENTS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    on_progress: Callable[[int], None] = lambda _bytes: None,
) -> Iterator[list[Line]]:
    """The non-blank lines of ``stream`` in batches of up to ``batch_events`` lines or ``batch_bytes``."""
    pending: list[Line] = []
    pending_bytes = 0
    for line in _iter_lines(stream, max_event_bytes):
        on_progress(line.size)
        if line.content is not None and not line.content.strip():
            continue
        pending.append(line)
        pending_bytes += line.size
        if len(pending) >= batch_events or pending_bytes >= batch_bytes:
            yield pending
            pending, pending_bytes = [], 0
    if pending:
        yield pending


def import_batch(
    session: Session, organization_id: int, lines: list[Line], max_event_bytes: int
) -> BatchReport:
    """Check each line of the batch and store the good ones in one transaction (see :func:`store_batch`).

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed; nothing of the batch is stored.
    """
    report = BatchReport()
    numbers: list[int] = []
    events: list[Event] = []
    rejects: dict[int, Reject] = {}
    for line in lines:
        try:
            if line.content is None:
                message = (
                    f"The line is longer than {max_event_bytes} bytes; split the event or raise the limit."
                )
                raise EventError([Problem("line", "too_long", message)])
            events.append(parse_event(line.content))
            numbers.append(line.number)
        except EventError as error:
            rejects[line.number] = Reject(line.number, tuple(error.problems))
    if events:
        for number, result in zip(numbers, store_batch(session, organization_id, events), strict=True):
            if isinstance(result, Refused):
                rejects[number] = Reject(number, (Problem("line", "rejected_by_database", result.reason),))
            else:
                report.stored += 1
                report.lineage[result.lineage] += 1
    report.rejects = [rejects[number] for number in sorted(rejects)]
    return report


def add_batch(
    report: ImportReport, batch: BatchReport, lines: int, on_reject: Callable[[Reject], None]
) -> None:
    """Count ``batch`` (of ``lines`` lines) into ``report``; ``on_reject`` for each of its rejects."""
    report.lines += lines
    report.stored += batch.stored
    report.rejected += len(batch.rejects)
    report.lineage.update(batch.lineage)
    for reject in batch.rejects:
        on_reject(reject)


def import_events(
    session: Session,
    organization_id: int,
    stream: BinaryIO,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    batch_events: int = DEFAULT_BATCH_EVENTS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    on_progress: Callable[[int], None] = lambda _bytes: None,
    on_reject: Callable[[Reject], None] = lambda _reject: None,
) -> ImportReport:
    """Store every valid event of ``stream`` into the organization's graph, a batch per transaction.

    Args:
        session: a session with no transaction in progress; it is committed after each batch.
        stream: the file, opened in binary mode.
        max_event_bytes: lines longer than this are rejected without being read into memory.
        batch_events, batch_bytes: a batch is stored once it holds this many events or line bytes.
        on_progress: called after each line with the number of bytes it took in the file.
        on_reject: called for each rejected line, in line order, once its batch is stored.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed (the batches before that one are stored).
    """
    report = ImportReport()
    batches = iter_batches(
        stream,
        max_event_bytes=max_event_bytes,
        batch_events=batch_events,
        batch_bytes=batch_bytes,
        on_progress=on_progress,
    )
    for lines in batches:
        add_batch(
            report, import_batch(session, organization_id, lines, max_event_bytes), len(lines), on_reject
        )
    return report
