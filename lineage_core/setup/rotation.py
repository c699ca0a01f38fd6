"""The External ID rotation as a state machine: which event may happen in which state, and what follows.

A rotation replaces a connection's External ID without an outage:

* **none**: one External ID, in use by every export.
* **start** → **pending**: a new ID is minted. The downloads trust both the current and the new ID;
  exports keep using the current one, which the deployed role already trusts.
* **verified** (Save passed with the new ID) → **verified**: exports use the new ID from now on. The
  downloads trust only the new one; the role may still trust the old one until it is updated again.
* **old-checked** (an export tried AssumeRole with the old ID): while it still works the rotation
  stays verified; once it no longer works → **complete**.
* **cancel** (before Save verified the new ID) → **none**: the new ID is dropped, the current one stays.

A new rotation may start from none or complete only: never two at once. :func:`next_state` is pure
(no database, no clock, no AWS); :mod:`lineage_core.setup.rotations` applies its answer to a connector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from lineage_core.infra.models import RotationState

__all__ = [
    "Cancel",
    "OldChecked",
    "RotationError",
    "RotationEvent",
    "RotationState",
    "Start",
    "Verified",
    "next_state",
]


class RotationError(ValueError):
    """An event that cannot happen in the rotation's state; ``str(error)`` is the sentence for the admin."""


@dataclass(frozen=True)
class Start:
    """The admin asked for a new External ID."""


@dataclass(frozen=True)
class Verified:
    """Save assumed the role with the new External ID and the write check passed."""


@dataclass(frozen=True)
class Cancel:
    """The admin cancelled the rotation."""


@dataclass(frozen=True)
class OldChecked:
    """AssumeRole was tried with the old External ID; ``works`` is whether the role accepted it."""

    works: bool


RotationEvent = Start | Verified | Cancel | OldChecked

_ALREADY_ROTATING = (
    "A new External ID is already waiting for Save. Update the stack with the downloaded template and "
    "click Save, or cancel that rotation, before you start another."
)
_STILL_FINISHING = (
    "The previous rotation is not finished: the role still trusts the old External ID. Update the "
    "stack with the template downloaded now to drop it; you can rotate again once the old External ID "
    "no longer works."
)
_NOTHING_TO_CANCEL = "There is no External ID rotation to cancel."
_TOO_LATE_TO_CANCEL = (
    "The new External ID is already in use, so the rotation can no longer be cancelled. Update the stack "
    "with the template downloaded now to drop the old External ID."
)
_NOTHING_TO_VERIFY = "There is no new External ID waiting for Save."
_NO_OLD_ID = "There is no old External ID to check."


def next_state(state: RotationState, event: RotationEvent) -> RotationState:
    """The rotation's state after ``event`` happens in ``state``.

    Raises:
        RotationError: the event cannot happen in this state (e.g. a second rotation while one is under
            way); its message says why and what to do instead.
    """
    match event:
        case Start():
            if state is RotationState.PENDING:
                raise RotationError(_ALREADY_ROTATING)
            if state is RotationState.VERIFIED:
                raise RotationError(_STILL_FINISHING)
            return RotationState.PENDING
        case Verified():
            if state is not RotationState.PENDING:
                raise RotationError(_NOTHING_TO_VERIFY)
            return RotationState.VERIFIED
        case Cancel():
            if state is RotationState.VERIFIED:
                raise RotationError(_TOO_LATE_TO_CANCEL)
            if state is not RotationState.PENDING:
                raise RotationError(_NOTHING_TO_CANCEL)
            return RotationState.NONE
        case OldChecked(works=works):
            if state is not RotationState.VERIFIED:
                raise RotationError(_NO_OLD_ID)
            return RotationState.VERIFIED if works else RotationState.COMPLETE
    assert_never(event)
