"""The "is it due" rules as a pure function of stored state and time (spec: "When exports run")."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from lineage_core.infra.models import ConnectorStatus
from lineage_core.schedule.rules import ScheduleState, is_due, next_export_at, next_nightly_run_after


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


ACTIVATED = t("2026-03-01 10:00")
FRESH = ScheduleState(
    status=ConnectorStatus.ACTIVE,
    interval_days=14,
    activated_at=ACTIVATED,
    last_success_started_at=None,
    last_attempt_finished_at=None,
    last_attempt_failed=False,
    in_flight=False,
)
SUCCEEDED = replace(
    FRESH, last_success_started_at=t("2026-03-01 10:00"), last_attempt_finished_at=t("2026-03-01 10:05")
)
FAILED = replace(SUCCEEDED, last_attempt_finished_at=t("2026-03-15 10:05"), last_attempt_failed=True)


def test_first_export_is_due_at_activation() -> None:
    assert next_export_at(FRESH) == ACTIVATED
    assert is_due(FRESH, ACTIVATED)
    assert not is_due(FRESH, ACTIVATED - timedelta(seconds=1))


@pytest.mark.parametrize(
    ("now", "due"),
    [
        ("2026-03-15 09:59:59", False),  # a second before 14 days since the snapshot
        ("2026-03-15 10:00:00", True),  # exactly the interval
        ("2026-03-15 10:00:01", True),
        ("2026-03-08 10:00:00", False),  # half way
        ("2026-06-01 00:00:00", True),  # long overdue (scheduler down for months)
    ],
)
def test_interval_boundary_counts_from_the_last_successful_snapshot(now: str, due: bool) -> None:
    assert is_due(SUCCEEDED, t(now)) is due


def test_the_interval_is_measured_from_the_start_not_the_end_of_the_run() -> None:
    long_run = replace(SUCCEEDED, last_attempt_finished_at=t("2026-03-01 16:00"))
    assert next_export_at(long_run) == t("2026-03-15 10:00")


def test_a_failure_retries_on_the_next_nights_run_not_the_next_interval() -> None:
    assert next_export_at(FAILED) == t("2026-03-16 02:00")
    assert not is_due(FAILED, t("2026-03-16 01:59"))
    assert is_due(FAILED, t("2026-03-16 02:00"))


@pytest.mark.parametrize(
    ("failed_at", "retry_at"),
    [
        ("2026-03-15 00:00:00", "2026-03-16 02:00"),  # just after midnight: still the *next* day
        ("2026-03-15 01:59:59", "2026-03-16 02:00"),  # before that night's run: not the same day
        ("2026-03-15 02:00:00", "2026-03-16 02:00"),  # the nightly run itself failed
        ("2026-03-15 23:59:59", "2026-03-16 02:00"),  # a second before midnight
        ("2026-12-31 23:00:00", "2027-01-01 02:00"),  # across the year
        ("2028-02-28 12:00:00", "2028-02-29 02:00"),  # leap day
    ],
)
def test_failure_times_around_midnight(failed_at: str, retry_at: str) -> None:
    state = replace(FAILED, last_attempt_finished_at=t(failed_at))
    assert next_export_at(state) == t(retry_at)


def test_failure_times_in_other_offsets_are_read_as_utc() -> None:
    # 01:30 at UTC+2 is 23:30 UTC the day before: the retry is the UTC day after that.
    local = datetime.fromisoformat("2026-03-16T01:30:00+02:00")
    assert next_nightly_run_after(local) == t("2026-03-16 02:00")


def test_several_failures_in_a_row_retry_each_next_night() -> None:
    state = FAILED
    retries = []
    for _ in range(4):
        retry = next_export_at(state)
        assert retry is not None
        retries.append(retry)
        state = replace(state, last_attempt_finished_at=retry + timedelta(minutes=3))
    assert retries == [
        t("2026-03-16 02:00"),
        t("2026-03-17 02:00"),
        t("2026-03-18 02:00"),
        t("2026-03-19 02:00"),
    ]


def test_success_after_failures_returns_to_the_interval() -> None:
    recovered = replace(
        FAILED,
        last_success_started_at=t("2026-03-16 02:00"),
        last_attempt_finished_at=t("2026-03-16 02:04"),
        last_attempt_failed=False,
    )
    assert next_export_at(recovered) == t("2026-03-30 02:00")


def test_failure_before_any_success_also_retries_next_night() -> None:
    state = replace(FRESH, last_attempt_finished_at=t("2026-03-01 10:01"), last_attempt_failed=True)
    assert next_export_at(state) == t("2026-03-02 02:00")


@pytest.mark.parametrize(
    ("interval", "expected"), [(14, "2026-03-15 10:00"), (30, "2026-03-31 10:00"), (365, "2027-03-01 10:00")]
)
def test_a_changed_interval_applies_to_the_next_export(interval: int, expected: str) -> None:
    assert next_export_at(replace(SUCCEEDED, interval_days=interval)) == t(expected)


def test_shortening_the_interval_can_make_an_export_due_at_once() -> None:
    state = replace(SUCCEEDED, interval_days=30)
    now = t("2026-03-20 00:00")
    assert not is_due(state, now)
    assert is_due(replace(state, interval_days=14), now)


@pytest.mark.parametrize("status", [ConnectorStatus.PAUSED, ConnectorStatus.DRAFT])
@pytest.mark.parametrize("state", [FRESH, SUCCEEDED, FAILED], ids=["fresh", "succeeded", "failed"])
def test_paused_or_unverified_connectors_are_never_due(status: ConnectorStatus, state: ScheduleState) -> None:
    assert next_export_at(replace(state, status=status)) is None
    assert not is_due(replace(state, status=status), t("2099-01-01 00:00"))


@pytest.mark.parametrize("state", [FRESH, SUCCEEDED, FAILED], ids=["fresh", "succeeded", "failed"])
def test_nothing_is_due_while_an_export_is_in_flight(state: ScheduleState) -> None:
    assert next_export_at(replace(state, in_flight=True)) is None


def test_resuming_a_paused_connector_catches_up_at_once() -> None:
    paused_long = replace(SUCCEEDED, status=ConnectorStatus.PAUSED)
    assert next_export_at(paused_long) is None
    assert is_due(replace(paused_long, status=ConnectorStatus.ACTIVE), t("2026-05-01 00:00"))
