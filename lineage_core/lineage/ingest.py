"""Store checked events: the unit of work of the ingest API (one event or a batch) and the file import.

On PostgreSQL a batch is one transaction and one set-based merge (:mod:`batch_merge`): every event of it
is stored, or, if the database refuses one of them, the batch is applied again event by event, each in
a savepoint, so that only the refused events are left out (each with the reason) and no other event is
lost. Deadlocks and serialization failures roll the whole transaction back and run it again.

On SQLite (the embedded default, one writer at a time) each event is its own transaction through the
per-event merge (:func:`merge.apply_event`): simpler, and as fast there, since SQLite costs no round
trips. A database failure then leaves the events before it stored; sending the batch again is harmless
(repeats change nothing).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg.errors
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from lineage_core.infra import driver_sql
from lineage_core.lineage import batch_sql
from lineage_core.lineage.batch_merge import PreparedEvent, apply_batch, prepare
from lineage_core.lineage.event import Event
from lineage_core.lineage.merge import ApplyResult, apply_event

ATTEMPTS = 4

log = logging.getLogger(__name__)

# Errors after which the same transaction, run again, normally succeeds: PostgreSQL chose this
# transaction as a deadlock victim, or SQLite's single writer lock was busy for longer than its timeout.
_RETRYABLE_PG = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
# Errors that come from the values of one event (a constraint the checks before the store do not know
# of): the event is refused, the others are stored. Anything else is the database's failure.
_EVENT_FAULTS = (IntegrityError, DataError)


@dataclass(frozen=True, slots=True)
class Refused:
    """An event the database refused; nothing of it is stored. ``reason`` is safe to show the sender."""

    reason: str


StoreResult = ApplyResult | Refused


def _retryable(error: DBAPIError) -> bool:
    if isinstance(error.orig, _RETRYABLE_PG):
        return True
    return "database is locked" in str(error.orig)


def _pause(attempt: int) -> None:
    # Jitter, so the transactions that collided do not collide again at once.
    time.sleep(random.uniform(0.005, 0.05) * attempt)  # noqa: S311 - not security related


def _reason(error: DBAPIError) -> str:
    """The database's one-line reason (no statement, no parameters: those stay in our logs)."""
    diag = getattr(error.orig, "diag", None)
    primary = getattr(diag, "message_primary", None) or type(error.orig).__name__
    return f"The database refused the event: {primary}. Nothing of it was stored."


def store_batch(
    session: Session,
    organization_id: int,
    events: Sequence[Event],
    *,
    before_commit: Callable[[Session], object] | None = None,
    after_commit: Sequence[Callable[[], object]] = (),
) -> list[StoreResult]:
    """Merge ``events`` into the organization's graph and commit; one result per event, in order.

    The session may already be in a transaction that holds only reads (the API key's lookup): it is
    continued, so a request costs one transaction. ``before_commit`` runs in the transaction just before
    the commit (the key's last-use time), and again if the transaction is retried; each of
    ``after_commit`` once the commit succeeded (never after a failure; an error one raises is logged,
    not raised, and the others still run: the events are stored). On SQLite, which commits event by
    event, ``before_commit`` runs in a last transaction of its own.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed (after the retries, for retryable errors);
            on PostgreSQL nothing of the batch is stored then.
    """
    if session.get_bind().dialect.name != "postgresql":
        results = _store_one_by_one(session, organization_id, events, before_commit)
    else:
        prepared = [prepare(event) for event in events]  # CPU only: before any lock is taken
        results = _store_pg(session, organization_id, prepared, before_commit, isolate_refused=True)
    for after in after_commit:
        try:
            after()
        except Exception:  # the events are stored: their answers stand whatever happens here
            log.exception("after storing %d events, some of their after-commit work failed", len(events))
    return results


def store_event(session: Session, organization_id: int, event: Event) -> ApplyResult:
    """Apply one event to the organization's graph and commit; one event, one transaction.

    A batch of one on PostgreSQL, the per-event merge on SQLite. The session must not be inside a
    transaction with pending writes: this commits, and on any error rolls back, so nothing of a failed
    event stays. Deadlocks and SQLite lock timeouts are retried a few times.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed or refused the event (after the retries, for
            retryable errors).
    """
    if session.get_bind().dialect.name == "postgresql":
        (result,) = _store_pg(session, organization_id, [prepare(event)], None, isolate_refused=False)
        assert isinstance(result, ApplyResult)  # refusals raise when not isolated
        return result
    for attempt in range(1, ATTEMPTS + 1):
        try:
            result = apply_event(session, organization_id, event)
            session.commit()
            return result
        except DBAPIError as error:
            session.rollback()
            if attempt == ATTEMPTS or not _retryable(error):
                raise
            _pause(attempt)
        except BaseException:
            session.rollback()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def _store_pg(
    session: Session,
    organization_id: int,
    prepared: Sequence[PreparedEvent],
    before_commit: Callable[[Session], object] | None,
    *,
    isolate_refused: bool,
) -> list[StoreResult]:
    """One transaction for the batch; retried after a deadlock; event by event once an event is refused."""
    isolating = False
    attempt = 0
    while True:
        attempt += 1
        try:
            driver_sql.run(session, batch_sql.MERGE_PLANNER, {})
            results: list[StoreResult]
            if isolating:
                results = _apply_isolating(session, organization_id, prepared)
            else:
                results = list(apply_batch(session, organization_id, prepared))
            if before_commit is not None:
                before_commit(session)
            session.commit()
            return results
        except DBAPIError as error:
            session.rollback()
            if _retryable(error) and attempt < ATTEMPTS:
                _pause(attempt)
                continue
            if isolate_refused and not isolating and isinstance(error, _EVENT_FAULTS):
                # Which event? Only the database knows: apply them one by one, each in a savepoint.
                log.warning(
                    "the database refused an event of a batch of %d; storing them one by one", len(prepared)
                )
                isolating, attempt = True, 0
                continue
            raise
        except BaseException:
            session.rollback()
            raise


def _apply_isolating(
    session: Session, organization_id: int, prepared: Sequence[PreparedEvent]
) -> list[StoreResult]:
    """The batch event by event, each in a savepoint: an event the database refuses is left out alone."""
    results: list[StoreResult] = []
    for item in prepared:
        savepoint = session.begin_nested()
        try:
            (result,) = apply_batch(session, organization_id, [item])
        except _EVENT_FAULTS as error:
            savepoint.rollback()
            log.warning("event refused by the database: %s", type(error.orig).__name__)
            results.append(Refused(_reason(error)))
        else:
            savepoint.commit()
            results.append(result)
    return results


def _store_one_by_one(
    session: Session,
    organization_id: int,
    events: Sequence[Event],
    before_commit: Callable[[Session], object] | None,
) -> list[StoreResult]:
    results: list[StoreResult] = []
    for event in events:
        try:
            results.append(store_event(session, organization_id, event))
        except _EVENT_FAULTS as error:
            results.append(Refused(_reason(error)))
    if before_commit is not None:
        before_commit(session)
    session.commit()
    return results
