"""Store one event in its own transaction: the unit of work of the ingest API and the file import."""

from __future__ import annotations

import random
import time

import psycopg.errors
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from lineage_core.lineage.event import Event
from lineage_core.lineage.merge import ApplyResult, apply_event

ATTEMPTS = 4

# Errors after which the same transaction, run again, normally succeeds: PostgreSQL chose this
# transaction as a deadlock victim, or SQLite's single writer lock was busy for longer than its timeout.
_RETRYABLE_PG = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)


def _retryable(error: DBAPIError) -> bool:
    if isinstance(error.orig, _RETRYABLE_PG):
        return True
    return "database is locked" in str(error.orig)


def store_event(session: Session, organization_id: int, event: Event) -> ApplyResult:
    """Apply ``event`` to the organization's graph and commit; one event, one transaction.

    The session must not be inside a transaction with pending work: this commits, and on any error rolls
    back, so nothing of a failed event stays. Deadlocks and SQLite lock timeouts are retried a few times.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed (after the retries, for retryable errors).
    """
    for attempt in range(1, ATTEMPTS + 1):
        try:
            result = apply_event(session, organization_id, event)
            session.commit()
            return result
        except DBAPIError as error:
            session.rollback()
            if attempt == ATTEMPTS or not _retryable(error):
                raise
            # Jitter, so the transactions that collided do not collide again at once.
            time.sleep(random.uniform(0.005, 0.05) * attempt)  # noqa: S311 - not security related
        except BaseException:
            session.rollback()
            raise
    raise AssertionError("unreachable")  # pragma: no cover
