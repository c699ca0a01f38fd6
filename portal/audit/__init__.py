"""The audit trail from the portal: :func:`audit` records what the signed-in user just did, and the
"Audit log" page (``views``) shows it: an org admin sees their organization's, an operator searches all.
"""

from __future__ import annotations

from typing import Any

from flask import request
from flask_login import current_user

from lineage_core.ops.audit import Action, Actor, record
from portal.database import get_db
from portal.logging import request_id


def current_actor() -> Actor:
    if current_user.is_authenticated:
        return Actor(current_user.email, current_user.user_id, current_user.organization_id)
    return Actor("anonymous")


def audit(
    action: Action,
    *,
    target_type: str | None = None,
    target_id: int | None = None,
    details: dict[str, Any] | None = None,
    actor: Actor | None = None,
    organization_id: int | None = None,
) -> None:
    """Add the row to this request's session: it is committed with the change it records."""
    record(
        get_db(),
        action,
        actor or current_actor(),
        organization_id=organization_id,
        target_type=target_type,
        target_id=target_id,
        address=request.remote_addr,
        request_id=request_id(),
        details=details,
    )
