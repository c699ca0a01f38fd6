"""The External ID rotation in the connector store: start, cancel, Save's verification, the old ID's checks.

Each function applies :func:`lineage_core.setup.rotation.next_state` to a connector's row and changes its
External ID columns to match; the caller commits (with its audit entry). The row is locked first
(``SELECT … FOR UPDATE`` on PostgreSQL), so two admins pressing "Rotate External ID" at once start one
rotation, and the second is refused like any second rotation.

Which ID is used where:

============  ====================  ======================  =====================
state         exports use           the downloads trust     Save checks
============  ====================  ======================  =====================
none          ``external_id``       ``external_id``         ``external_id``
pending       ``external_id``       current and new         ``new_external_id``
verified      ``external_id`` (new) ``external_id``         ``external_id``
complete      ``external_id`` (new) ``external_id``         ``external_id``
============  ====================  ======================  =====================

At Save (verified), the new ID becomes ``external_id`` and the replaced one ``old_external_id``, which
every export then tries (:mod:`lineage_core.export.old_id_check`) until the role refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus
from lineage_core.setup import connectors
from lineage_core.setup.destination import Destination, new_external_id
from lineage_core.setup.rotation import (
    Cancel,
    OldChecked,
    RotationError,
    RotationState,
    Start,
    Verified,
    next_state,
)
from lineage_core.setup.write_check import WriteCheckResult

__all__ = [
    "Activation",
    "RotationError",
    "activate_checked",
    "cancel_rotation",
    "record_old_id_check",
    "rotation_view",
    "save_destination",
    "start_rotation",
]

TIME = "%Y-%m-%d %H:%M UTC"  # as the card shows times
_MINT_ATTEMPTS = 5
_NOT_SAVED = (
    "Finish the setup and click Save first: the External ID of a connection can be rotated once it is "
    "connected."
)


def start_rotation(session: Session, connector: Connector) -> Connector:
    """Mint a new External ID for ``connector``: the downloads trust it beside the current one from now on.

    Exports keep using the current ID until Save verifies the new one (:func:`activate_checked`).

    Raises:
        RotationError: the connection was never saved, or a rotation is already under way.
    """
    _lock(session, connector)
    if connector.status is ConnectorStatus.DRAFT:
        raise RotationError(_NOT_SAVED)
    state = next_state(connector.rotation_state, Start())
    connector.new_external_id = _unused_external_id(session)
    connector.old_external_id = None
    connector.old_external_id_works = None
    connector.old_external_id_checked_at = None
    connector.rotation_state = state
    session.flush()
    return connector


def cancel_rotation(session: Session, connector: Connector) -> Connector:
    """Drop the new External ID before Save verified it: the downloads trust only the current one again.

    Raises:
        RotationError: no rotation is waiting for Save (none started, or the new ID is already in use).
    """
    _lock(session, connector)
    connector.rotation_state = next_state(connector.rotation_state, Cancel())
    connector.new_external_id = None
    session.flush()
    return connector


def save_destination(connector: Connector, partition: str) -> Destination:
    """The destination Save's write check proves: with the new External ID while a rotation is pending.

    Args:
        partition: the AWS partition of our region, as for :func:`connectors.destination_of`.
    """
    destination = connectors.destination_of(connector, partition)
    if connector.rotation_state is RotationState.PENDING and connector.new_external_id:
        return replace(destination, external_id=connector.new_external_id)
    return destination


@dataclass(frozen=True)
class Activation:
    newly_active: bool  # the connector was not active before this Save
    rotation_verified: bool  # this Save verified a new External ID: exports use it from now on


def activate_checked(connector: Connector, result: WriteCheckResult) -> Activation:
    """Record a passing write check of :func:`save_destination`; a pending rotation is then verified.

    The connector becomes active (:func:`connectors.activate`); if the check ran with a new External ID,
    that ID becomes the one exports use and the replaced one is kept as the old ID, to be checked.
    """
    newly_active = connectors.activate(connector, result)
    if connector.rotation_state is not RotationState.PENDING or connector.new_external_id is None:
        return Activation(newly_active=newly_active, rotation_verified=False)
    connector.rotation_state = next_state(connector.rotation_state, Verified())
    connector.old_external_id = connector.external_id
    connector.external_id = connector.new_external_id
    connector.new_external_id = None
    connector.old_external_id_works = None
    connector.old_external_id_checked_at = None
    return Activation(newly_active=newly_active, rotation_verified=True)


def old_id_to_check(connector: Connector) -> str | None:
    """The old External ID an export should try, or None when there is none to check."""
    if connector.rotation_state is RotationState.VERIFIED:
        return connector.old_external_id
    return None


def record_old_id_check(
    session: Session, connector_id: int, old_external_id: str, works: bool, checked_at: datetime
) -> Connector | None:
    """Record what AssumeRole with ``old_external_id`` said; the rotation completes once it stops working.

    Returns:
        The connector, or None when there was nothing to record: it is gone, or its rotation moved on
        since the check began (cancelled, completed, or a new one started), so the result is stale.
    """
    connector = session.scalar(
        select(Connector)
        .where(Connector.id == connector_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if connector is None or old_id_to_check(connector) != old_external_id:
        return None
    connector.rotation_state = next_state(connector.rotation_state, OldChecked(works=works))
    connector.old_external_id_works = works
    connector.old_external_id_checked_at = checked_at
    session.flush()
    return connector


def trusted_ids(connector: Connector) -> tuple[str, str | None]:
    """The IDs the downloads put in the role's trust policy: the current one, and the new one if pending."""
    if connector.rotation_state is RotationState.PENDING:
        return connector.external_id, connector.new_external_id
    return connector.external_id, None


def rotation_view(connector: Connector) -> dict[str, Any]:
    """The rotation as JSON-able data: what the card shows, and what the connections API returns.

    Keys: ``state``; ``externalId`` (the one exports use now); ``newExternalId`` (pending only);
    ``oldExternalId`` (verified and complete); ``oldIdStillWorks`` (None until an export checked it);
    ``oldIdCheckedAt`` (ISO 8601, or None); ``message`` (the card's sentence).
    """
    checked_at = connector.old_external_id_checked_at
    return {
        "state": connector.rotation_state.value,
        "externalId": connector.external_id,
        "newExternalId": connector.new_external_id,
        "oldExternalId": connector.old_external_id,
        "oldIdStillWorks": connector.old_external_id_works,
        "oldIdCheckedAt": checked_at.isoformat() if checked_at else None,
        "message": rotation_message(connector),
    }


def rotation_message(connector: Connector) -> str:
    """The sentence the card shows about the External ID, in the spec's words (Part 2, Part 3)."""
    state = connector.rotation_state
    checked = connector.old_external_id_checked_at
    at = checked.strftime(TIME) if checked else ""
    if state is RotationState.PENDING:
        return (
            "A new External ID is ready. Download the template again, update the stack in AWS account "
            f"{connector.account_id} with it, then click Save. Until Save passes, exports keep using the "
            "current External ID."
        )
    if state is RotationState.VERIFIED and connector.old_external_id_works is None:
        return (
            "Exports now use the new External ID. Update the stack again with the template downloaded now "
            "to drop the old External ID. The next export checks whether the old one still works."
        )
    if state is RotationState.VERIFIED:
        return (
            f"Exports now use the new External ID, but the role still trusts the old one (checked at {at}). "
            "Update the stack again with the template downloaded now to drop it."
        )
    if state is RotationState.COMPLETE:
        return (
            f"Rotation complete: the old External ID no longer works (checked at {at}). "
            "The role trusts only the External ID shown here."
        )
    return "Exports use this External ID."


def _lock(session: Session, connector: Connector) -> None:
    # Re-read the row under a lock: a rotation started (or cancelled) by a concurrent request since the
    # object was loaded is seen here, and the next concurrent one waits for this transaction.
    session.refresh(connector, with_for_update=True)


def _unused_external_id(session: Session) -> str:
    for _ in range(_MINT_ATTEMPTS):
        candidate = new_external_id()
        taken = session.scalar(
            select(Connector.id)
            .where(
                or_(
                    Connector.external_id == candidate,
                    Connector.new_external_id == candidate,
                    Connector.old_external_id == candidate,
                )
            )
            .limit(1)
        )
        if taken is None:
            return candidate
    # 192 random bits each time: only a broken random source gets here.
    raise RuntimeError(f"no unused External ID in {_MINT_ATTEMPTS} attempts")
