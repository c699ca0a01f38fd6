"""Group commit: single events of one organization that arrive together are stored in one transaction.

Against real PostgreSQL, with real threads. A group forms only while a store is running, so each test
first holds the organization's row locked from another connection: the first request's store waits on
it (creating a job checks its organization), the others queue behind it, and the lock is let go once
they all wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine, session_factory
from lineage_core.lineage.group_commit import (
    CommitHook,
    GroupCommit,
    GroupStoreFailedError,
    GroupStoreStoppedError,
)
from lineage_core.lineage.ingest import Refused, StoreResult, store_event
from lineage_core.lineage.merge import ApplyResult, LineageOutcome
from lineage_core.lineage.parse import check_event
from tests.db_refusals import POISON, refusing_jobs_named_poison
from tests.factories import dataset, make_org, run_event
from tests.readback import graph_of

FOLLOWERS = 4


def _event(job: str, time_: str = "2024-05-01T12:00:00Z") -> Any:
    return check_event(
        run_event(job=job, time=time_, inputs=[dataset("raw.a")], outputs=[dataset(f"out.{job}")]),
        now=None,
    )


@contextmanager
def _organization_locked(database_url: str, organization_id: int) -> Iterator[Callable[[], None]]:
    """Holds the organization's row locked; yields the function that lets it go."""
    connection = get_engine(database_url).connect()
    transaction = connection.begin()
    connection.execute(text("SELECT 1 FROM organizations WHERE id = :id FOR UPDATE"), {"id": organization_id})
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            transaction.rollback()
            released = True

    try:
        yield release
    finally:
        release()
        connection.close()


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _store_in_threads(
    settings: Settings,
    commits: GroupCommit,
    organization_id: int,
    events: list[Any],
    hooks: list[CommitHook | None] | None = None,
) -> list[Future[StoreResult]]:
    """The first event stored first (its store blocked by the caller's lock), then the others together
    (each with its hook from ``hooks``, if given), queued in their order."""
    factory = session_factory(settings.database_url)
    hooks = hooks or [None] * len(events)

    def store(event: Any, hook: CommitHook | None) -> StoreResult:
        session = factory()
        try:
            return commits.store(session, organization_id, event, hook)
        finally:
            session.close()

    pool = ThreadPoolExecutor(len(events))
    first = pool.submit(store, events[0], hooks[0])
    _wait_until(lambda: organization_id in commits._waiting)  # the first leads (and is blocked)
    rest: list[Future[StoreResult]] = []
    for position, (event, hook) in enumerate(zip(events[1:], hooks[1:], strict=True), start=1):
        rest.append(pool.submit(store, event, hook))
        _wait_until(lambda position=position: len(commits._waiting.get(organization_id, ())) == position)
    pool.shutdown(wait=False)
    return [first, *rest]


def test_requests_that_arrive_during_a_store_are_stored_together_each_with_its_answer(
    settings: Settings, db: Session
) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit()
    events = [_event(f"job{i}") for i in range(1 + FOLLOWERS)]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events)
        assert not any(future.done() for future in futures)
        release()
        results = [future.result(timeout=30) for future in futures]

    assert commits.groups_stored == 2  # the first alone, then the four that waited, in one transaction
    assert commits.events_stored == 1 + FOLLOWERS
    assert all(isinstance(r, ApplyResult) and r.lineage is LineageOutcome.REPLACED for r in results)
    # The same graph as storing them one by one.
    other = make_org(db, "one-by-one")
    for event in events:
        store_event(db, other.id, event)
    assert graph_of(db, org.id) == graph_of(db, other.id)


def test_each_request_gets_its_own_events_answer_in_arrival_order(settings: Settings, db: Session) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit()
    # The same job three times: new, the same again (unchanged), an older run (stale).
    events = [
        _event("first"),
        _event("job", "2024-05-02T00:00:00Z"),
        _event("job", "2024-05-02T00:00:00Z"),
        _event("job", "2024-05-01T00:00:00Z"),
    ]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events)
        release()
        outcomes = [future.result(timeout=30).lineage for future in futures]  # type: ignore[union-attr]
    assert outcomes == [
        LineageOutcome.REPLACED,
        LineageOutcome.REPLACED,
        LineageOutcome.UNCHANGED,
        LineageOutcome.STALE,
    ]


def test_an_event_the_database_refuses_is_refused_alone(settings: Settings, db: Session) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit()
    events = [_event("first"), _event("left"), _event(POISON), _event("right")]
    with (
        refusing_jobs_named_poison(settings.database_url),
        _organization_locked(settings.database_url, org.id) as release,
    ):
        futures = _store_in_threads(settings, commits, org.id, events)
        release()
        results = [future.result(timeout=30) for future in futures]

    assert isinstance(results[2], Refused)
    assert "no poison jobs" in results[2].reason
    assert [isinstance(r, ApplyResult) for r in results] == [True, True, False, True]
    assert sorted(job["name"] for job in graph_of(db, org.id)) == ["first", "left", "right"]


@pytest.fixture
def failing_outage_jobs(settings: Settings) -> Iterator[None]:
    """PostgreSQL fails (not a refusal of the event: an internal error) when a job 'outage' is created."""
    engine = get_engine(settings.database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "CREATE FUNCTION test_outage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.name = 'outage' THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; END $$"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER test_outage BEFORE INSERT ON lineage_jobs "
                "FOR EACH ROW EXECUTE FUNCTION test_outage()"
            )
        )
    yield
    with engine.begin() as conn:
        conn.execute(text("DROP TRIGGER test_outage ON lineage_jobs"))
        conn.execute(text("DROP FUNCTION test_outage()"))


@pytest.mark.usefixtures("failing_outage_jobs")
def test_a_database_failure_fails_every_request_of_the_group_and_stores_none(
    settings: Settings, db: Session
) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit()
    events = [_event("first"), _event("left"), _event("outage"), _event("right")]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events)
        release()
        assert isinstance(futures[0].result(timeout=30), ApplyResult)
        errors = []
        for future in futures[1:]:
            with pytest.raises(Exception) as raised:  # which one: checked below
                future.result(timeout=30)
            errors.append(raised.value)
    # The request that stored the group raises the database's error; each of the others an error of
    # its own caused by it (one object raised in several threads would mix their tracebacks).
    (leader,) = [error for error in errors if isinstance(error, DBAPIError)]
    assert "disk full" in str(leader)
    followers = [error for error in errors if error is not leader]
    assert len(followers) == 2 and followers[0] is not followers[1]
    assert all(isinstance(f, GroupStoreFailedError) and f.__cause__ is leader for f in followers)
    assert [job["name"] for job in graph_of(db, org.id)] == ["first"]
    assert org.id not in commits._waiting  # nothing left waiting: the next request leads at once


def test_a_lone_request_leads_at_once_and_organizations_never_share_a_group(
    settings: Settings, db: Session
) -> None:
    acme, globex = make_org(db, "acme"), make_org(db, "globex")
    commits = GroupCommit()
    with _organization_locked(settings.database_url, acme.id) as release:
        blocked = threading.Thread(
            target=commits.store, args=(session_factory(settings.database_url)(), acme.id, _event("a"))
        )
        blocked.start()
        _wait_until(lambda: acme.id in commits._waiting)
        # Acme's store is blocked; Globex's request does not wait for it.
        result = commits.store(db, globex.id, _event("g"))
        assert isinstance(result, ApplyResult)
        assert commits.groups_stored == 1
        release()
        blocked.join(timeout=30)
    assert commits.groups_stored == 2
    assert commits._waiting == {}


def test_a_group_is_at_most_the_largest_size_and_the_rest_lead_in_turn(
    settings: Settings, db: Session
) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit(max_group_events=2)
    events = [_event(f"job{i}") for i in range(6)]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events)
        release()
        assert all(isinstance(future.result(timeout=30), ApplyResult) for future in futures)
    assert commits.events_stored == 6
    assert commits.groups_stored == 1 + 3  # the first alone, then the five waiting ones two at a time
    assert len(graph_of(db, org.id)) == 6


def test_a_leader_stopped_mid_store_fails_the_others_with_an_error_of_their_own(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lineage_core.lineage.group_commit as group_commit

    real_store = group_commit.store_batch

    def stopped_for_groups(session: Session, organization_id: int, events: Any, **kwargs: Any) -> Any:
        if len(events) > 1:  # the worker is being shut down while it stores the group
            raise SystemExit(0)
        return real_store(session, organization_id, events, **kwargs)

    monkeypatch.setattr(group_commit, "store_batch", stopped_for_groups)
    org = make_org(db, "acme")
    commits = GroupCommit()
    events = [_event("first"), _event("left"), _event("right")]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events)
        release()
        assert isinstance(futures[0].result(timeout=30), ApplyResult)
        outcomes = []
        for future in futures[1:]:
            try:
                future.result(timeout=30)
            except BaseException as error:
                outcomes.append(type(error))
    assert sorted(outcomes, key=str) == sorted([SystemExit, GroupStoreStoppedError], key=str)
    assert commits._waiting == {}
    assert [job["name"] for job in graph_of(db, org.id)] == ["first"]


def test_a_request_whose_commit_fails_before_it_waits_leaves_nothing_for_the_others_to_wait_on(
    settings: Settings, db: Session
) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit()
    factory = session_factory(settings.database_url)
    broken = factory()

    def lost_connection() -> None:
        raise OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"))

    broken.commit = lost_connection  # type: ignore[method-assign]
    with _organization_locked(settings.database_url, org.id) as release:
        pool = ThreadPoolExecutor(3)
        first = pool.submit(lambda: commits.store(factory(), org.id, _event("first")))
        _wait_until(lambda: org.id in commits._waiting)
        with pytest.raises(OperationalError):
            commits.store(broken, org.id, _event("lost"))  # its commit fails before it queues
        later = pool.submit(lambda: commits.store(factory(), org.id, _event("later")))
        _wait_until(lambda: len(commits._waiting.get(org.id, ())) == 1)
        release()
        assert isinstance(first.result(timeout=30), ApplyResult)
        assert isinstance(later.result(timeout=30), ApplyResult)  # not left waiting for "lost"
        pool.shutdown()
    broken.close()
    assert commits._waiting == {}
    assert sorted(job["name"] for job in graph_of(db, org.id)) == ["first", "later"]


class _HookCalls:
    """Hooks that write down when they ran: ("before", label) in the transaction, ("after", label) after
    it. A hook made with ``fails_commit`` writes a row that makes its transaction's COMMIT fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def hook(
        self, id_: int, label: str | None = None, *, fails_commit: bool = False, after_fails: bool = False
    ) -> CommitHook:
        label = label or str(id_)

        def before(session: Session) -> None:
            if fails_commit:
                session.execute(text("INSERT INTO test_fails_at_commit VALUES (1)"))
            else:
                session.execute(text("SELECT 1"))  # in the group's transaction
            with self._lock:
                self.calls.append(("before", label))

        def after() -> None:
            with self._lock:
                self.calls.append(("after", label))
            if after_fails:
                raise RuntimeError("this hook's after-commit work fails")

        return CommitHook(("key", id_), before, after)


@pytest.fixture
def table_that_fails_commits(settings: Settings) -> Iterator[None]:
    """``test_fails_at_commit``: a transaction that wrote a row in it fails at its COMMIT (a deferred
    constraint trigger), after everything before the commit succeeded."""
    statements = [
        "CREATE TABLE test_fails_at_commit (x integer)",
        "CREATE FUNCTION test_fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'test: refused at commit'; END $$",
        "CREATE CONSTRAINT TRIGGER test_fail_at_commit AFTER INSERT ON test_fails_at_commit "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail_at_commit()",
    ]
    with get_engine(settings.database_url).begin() as connection:
        for statement in statements:
            connection.execute(text(statement))
    yield
    with get_engine(settings.database_url).begin() as connection:  # a connection of its own
        connection.execute(text("DROP TABLE IF EXISTS test_fails_at_commit"))
        connection.execute(text("DROP FUNCTION IF EXISTS test_fail_at_commit()"))


def test_a_groups_hooks_run_once_per_key_in_key_order_and_after_its_commit(
    settings: Settings, db: Session
) -> None:
    """Hooks write rows (the API keys' last use): in key order, two groups cannot lock them in a cycle,
    and a key that ten requests of a group used is written once."""
    org = make_org(db, "acme")
    commits = GroupCommit()
    recorded = _HookCalls()
    # The first stores alone; the others arrive in this order and form a group (key 3 twice).
    hooks = [
        recorded.hook(9),
        recorded.hook(3, "3a"),
        recorded.hook(1),
        recorded.hook(3, "3b"),
        recorded.hook(2),
    ]
    events = [_event(f"job{i}") for i in range(len(hooks))]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events, list(hooks))
        release()
        for future in futures:
            future.result(timeout=30)

    assert commits.groups_stored == 2
    assert recorded.calls == [
        ("before", "9"), ("after", "9"),
        ("before", "1"), ("before", "2"), ("before", "3a"), ("after", "1"), ("after", "2"), ("after", "3a"),
    ]  # fmt: skip


def test_no_hook_runs_its_after_part_when_the_groups_commit_fails(
    settings: Settings, db: Session, table_that_fails_commits: None
) -> None:
    org = make_org(db, "acme")
    commits = GroupCommit()
    recorded = _HookCalls()
    hooks = [recorded.hook(0), recorded.hook(1), recorded.hook(2, fails_commit=True)]
    events = [_event(f"job{i}") for i in range(3)]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events, hooks)
        release()
        futures[0].result(timeout=30)
        for future in futures[1:]:
            with pytest.raises((DBAPIError, GroupStoreFailedError)):
                future.result(timeout=30)

    # Every part before the commit ran; the commit failed, so no after part did.
    assert recorded.calls == [("before", "0"), ("after", "0"), ("before", "1"), ("before", "2")]
    assert [job["name"] for job in graph_of(db, org.id)] == ["job0"]  # nothing of the group


def test_a_failing_after_part_takes_nothing_from_the_others_nor_from_the_answers(
    settings: Settings, db: Session
) -> None:
    """After the commit the events are stored: an after part that raises is logged, and every request
    of the group still gets its answer."""
    org = make_org(db, "acme")
    commits = GroupCommit()
    recorded = _HookCalls()
    hooks = [recorded.hook(0), recorded.hook(1, after_fails=True), recorded.hook(2)]
    events = [_event(f"job{i}") for i in range(3)]
    with _organization_locked(settings.database_url, org.id) as release:
        futures = _store_in_threads(settings, commits, org.id, events, hooks)
        release()
        results = [future.result(timeout=30) for future in futures]

    assert all(isinstance(result, ApplyResult) for result in results)
    assert ("after", "2") in recorded.calls
    assert commits.groups_stored == 2
