"""Store the events of one organization that arrive at the same time in one transaction (group commit).

The single-event endpoint is called by many producers at once, each request with one event. Stored one
per transaction, each event pays a transaction's fixed costs (about ten statements and a commit that
waits for the disk). Here, requests of the same process for the same organization that arrive while one
of them is storing wait for it to finish, and the next one stores all of them as one batch
(:func:`lineage_core.lineage.ingest.store_batch`), then hands over to the next waiting request:

* No thread of our own and no timer: the request that finds no store of its organization running stores
  at once (a lone request waits for nothing), and a group forms only while the database is busy.
* Each request gets its own event's answer: a batch answers each event as if the events were applied one
  by one in arrival order, and an event the database refuses is refused alone (its neighbours are
  stored). A database failure fails every request of the group (each answers 503; on PostgreSQL nothing
  of the group is stored, on SQLite the events before the failure are).
* A request that stores leads one group only, of at most :data:`MAX_GROUP_EVENTS`; the waiting requests
  then lead in turn, so no request serves the others for long.
* What a request adds to the transaction (its API key's last use: a :class:`CommitHook`) runs once per
  hook key for the whole group, in key order: two groups that write the same keys' rows take their locks
  in the same order, and a key used by ten requests of a group is written once.

Organizations never share a group: one organization's burst does not wait for another's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lineage_core.lineage.event import Event
from lineage_core.lineage.ingest import StoreResult, store_batch

# The most events one transaction stores for waiting requests: a group's transaction stays short.
MAX_GROUP_EVENTS = 100


@dataclass(frozen=True, slots=True)
class CommitHook:
    """Work a request adds to the transaction that stores its event.

    ``before`` runs in that transaction just before its commit (again if the transaction is retried; on
    SQLite, which commits event by event, in a last transaction of its own); ``after`` runs once it
    committed, never if it failed, and an error it raises is logged, not raised: the events are stored.
    A group runs one hook per ``key`` (the first request's), sorted by ``key`` (a kind and an id): hooks
    with the same key must do the same work.
    """

    key: tuple[str, int]
    before: Callable[[Session], object]
    after: Callable[[], object] | None = None


class GroupStoreError(RuntimeError):
    """The request storing this event's group did not store it; nothing of the group is stored on
    PostgreSQL. The API answers 503: send the event again."""


class GroupStoreStoppedError(GroupStoreError):
    """The request storing this event's group was stopped before it finished (its worker is shutting
    down); the transaction was rolled back."""

    def __init__(self) -> None:
        super().__init__("the request storing this event's group stopped; send the event again")


class GroupStoreFailedError(GroupStoreError):
    """Storing this event's group failed; the error the request storing it met (the database's, or
    any other that stopped it) is the ``__cause__``. Nothing of the group is stored: a 503 is right.

    Each waiting request raises one of its own: one exception object raised in several threads at once
    would collect all their frames in its one traceback (and log them mixed).
    """

    def __init__(self, cause: Exception) -> None:
        # The cause's message is logged with the cause; its type is enough here.
        super().__init__(f"storing this event's group failed ({type(cause).__name__})")


@dataclass(eq=False, slots=True)
class _Request:
    event: Event
    hook: CommitHook | None
    done: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # set, with ``done``, when this request is to store the next group
    group: list[_Request] = field(default_factory=list)  # the group it stores, when it leads
    result: StoreResult | None = None
    error: BaseException | None = None


class GroupCommit:
    """Group commit for one process: use one instance per process (see :data:`GROUP_COMMIT`)."""

    def __init__(self, max_group_events: int = MAX_GROUP_EVENTS) -> None:
        self._max = max_group_events
        self._lock = threading.Lock()
        self._waiting: dict[int, list[_Request]] = {}  # per organization with a store running
        self.groups_stored = 0  # statistics, for tests and benchmarks
        self.events_stored = 0

    def store(
        self,
        session: Session,
        organization_id: int,
        event: Event,
        hook: CommitHook | None = None,
    ) -> StoreResult:
        """Store ``event`` (possibly with other requests' events) and return its answer.

        ``session`` is the request's own; it is committed (ending its reads) before the request waits,
        and stores the group if this request leads one. ``hook`` runs with the transaction that stores
        the event (see :class:`CommitHook`).

        Raises:
            sqlalchemy.exc.DBAPIError: the database failed; on PostgreSQL nothing of the event is stored.
            GroupStoreFailedError: storing this event's group, led by another request, failed (the
                error it met is the ``__cause__``).
            GroupStoreStoppedError: the request storing this event's group was stopped.
        """
        me = _Request(event, hook)
        if not self._lead_if_idle(organization_id, me):
            # Hold no transaction (nor its snapshot) open while waiting. Committed before the request
            # joins the queue: a commit that fails leaves nothing behind for the others to wait on.
            session.commit()
            if not self._lead_if_idle(organization_id, me, or_wait=True):
                me.done.wait()
                if not me.leads:
                    return self._answer(me)
                # Promoted: this request stores the group handed to it (it is the first of it).
        self._lead(session, organization_id, me)
        assert me.result is not None  # _lead raised otherwise
        return me.result

    def _lead_if_idle(self, organization_id: int, me: _Request, *, or_wait: bool = False) -> bool:
        """Lead (a group of ``me`` alone) if no store of the organization runs; else queue ``me`` if
        ``or_wait``. True if ``me`` leads."""
        with self._lock:
            waiting = self._waiting.get(organization_id)
            if waiting is None:
                self._waiting[organization_id] = []
                me.leads, me.group = True, [me]
                return True
            if or_wait:
                waiting.append(me)
            return False

    def _lead(self, session: Session, organization_id: int, me: _Request) -> None:
        group = me.group
        hooks = _once_each([request.hook for request in group])
        try:
            results = store_batch(
                session,
                organization_id,
                [request.event for request in group],
                before_commit=_before_all(hooks),
                after_commit=[hook.after for hook in hooks if hook.after is not None],
            )
        except BaseException as error:
            # The others' answer (each raises an error of its own, see _answer): the database's error,
            # or, if this thread is being stopped (SystemExit, KeyboardInterrupt), not the stop.
            for request in group:
                request.error = error
            raise
        else:
            for request, result in zip(group, results, strict=True):
                request.result = result
        finally:
            with self._lock:
                if me.error is None:
                    self.groups_stored += 1
                    self.events_stored += len(group)
                waiting = self._waiting[organization_id]
                if waiting:  # hand the lead, and the next group, to the first request waiting
                    successor = waiting[0]
                    successor.group = waiting[: self._max]
                    del waiting[: self._max]
                    successor.leads = True
                    successor.done.set()
                else:
                    del self._waiting[organization_id]
            for request in group:
                if request is not me:
                    request.done.set()

    @staticmethod
    def _answer(request: _Request) -> StoreResult:
        """A waiting request's answer, from the group's store that another request led."""
        error = request.error
        if isinstance(error, Exception):
            raise GroupStoreFailedError(error) from error
        if error is not None:
            raise GroupStoreStoppedError()
        assert request.result is not None  # set by the group's store, or an error is
        return request.result


def _once_each(hooks: Sequence[CommitHook | None]) -> list[CommitHook]:
    """The group's hooks, the first of each key, in key order."""
    by_key: dict[tuple[str, int], CommitHook] = {}
    for hook in hooks:
        if hook is not None:
            by_key.setdefault(hook.key, hook)
    return [by_key[key] for key in sorted(by_key)]


def _before_all(hooks: list[CommitHook]) -> Callable[[Session], None] | None:
    if not hooks:
        return None

    def run(session: Session) -> None:
        for hook in hooks:
            hook.before(session)

    return run


# The process's group commit: the web worker's threads share it.
GROUP_COMMIT = GroupCommit()
