"""The External ID rotation's state machine (lineage_core.setup.rotation): every transition, every refusal.

Pure: no database, no AWS. The table below lists every (state, event) pair; each either leads to a state
or is refused with the sentence the admin reads.
"""

from __future__ import annotations

import pytest

from lineage_core.setup.rotation import (
    Cancel,
    OldChecked,
    RotationError,
    RotationEvent,
    RotationState,
    Start,
    Verified,
    next_state,
)

NONE, PENDING, VERIFIED, COMPLETE = (
    RotationState.NONE,
    RotationState.PENDING,
    RotationState.VERIFIED,
    RotationState.COMPLETE,
)
EVENTS: list[RotationEvent] = [Start(), Verified(), Cancel(), OldChecked(works=True), OldChecked(works=False)]

TRANSITIONS: dict[tuple[RotationState, RotationEvent], RotationState] = {
    (NONE, Start()): PENDING,
    (COMPLETE, Start()): PENDING,
    (PENDING, Verified()): VERIFIED,
    (PENDING, Cancel()): NONE,
    (VERIFIED, OldChecked(works=True)): VERIFIED,
    (VERIFIED, OldChecked(works=False)): COMPLETE,
}

REFUSALS: dict[tuple[RotationState, RotationEvent], str] = {
    (PENDING, Start()): "A new External ID is already waiting for Save.",
    (VERIFIED, Start()): "The previous rotation is not finished: the role still trusts the old External ID.",
    (NONE, Verified()): "There is no new External ID waiting for Save.",
    (VERIFIED, Verified()): "There is no new External ID waiting for Save.",
    (COMPLETE, Verified()): "There is no new External ID waiting for Save.",
    (NONE, Cancel()): "There is no External ID rotation to cancel.",
    (COMPLETE, Cancel()): "There is no External ID rotation to cancel.",
    (
        VERIFIED,
        Cancel(),
    ): "The new External ID is already in use, so the rotation can no longer be cancelled.",
    (NONE, OldChecked(works=True)): "There is no old External ID to check.",
    (NONE, OldChecked(works=False)): "There is no old External ID to check.",
    (PENDING, OldChecked(works=True)): "There is no old External ID to check.",
    (PENDING, OldChecked(works=False)): "There is no old External ID to check.",
    (COMPLETE, OldChecked(works=True)): "There is no old External ID to check.",
    (COMPLETE, OldChecked(works=False)): "There is no old External ID to check.",
}


def test_the_tables_cover_every_state_and_event_exactly_once() -> None:
    pairs = {(state, event) for state in RotationState for event in EVENTS}
    assert set(TRANSITIONS) | set(REFUSALS) == pairs
    assert not set(TRANSITIONS) & set(REFUSALS)


@pytest.mark.parametrize(("state", "event"), list(TRANSITIONS), ids=lambda value: repr(value))
def test_transition(state: RotationState, event: RotationEvent) -> None:
    assert next_state(state, event) is TRANSITIONS[(state, event)]


@pytest.mark.parametrize(("state", "event"), list(REFUSALS), ids=lambda value: repr(value))
def test_refusal(state: RotationState, event: RotationEvent) -> None:
    with pytest.raises(RotationError) as refused:
        next_state(state, event)
    message = str(refused.value)
    assert message.startswith(REFUSALS[(state, event)])
    # A sentence for the admin: it ends like one, and a refusal of a second rotation says what to do.
    assert message.endswith(".")


def test_a_second_rotation_is_refused_with_what_to_do_instead() -> None:
    with pytest.raises(RotationError, match="click Save, or cancel that rotation"):
        next_state(PENDING, Start())
    with pytest.raises(RotationError, match="Update the stack with the template downloaded now"):
        next_state(VERIFIED, Start())


def test_a_whole_rotation_then_another() -> None:
    state = NONE
    for event in (Start(), Verified(), OldChecked(works=True), OldChecked(works=False), Start(), Cancel()):
        state = next_state(state, event)
    assert state is NONE
