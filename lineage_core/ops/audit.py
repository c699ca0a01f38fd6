"""The audit trail: who did what to which connection, key or account, when, from where, what changed.

Rows are only ever inserted (the database refuses UPDATE and DELETE of ``audit_events``, migration
0007). ``details`` is a small JSON object of what changed; it never carries a secret: keys whose names
say password, secret, token, External ID or key material are refused here, so a careless caller fails
in tests instead of writing one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import AuditEvent, Organization

ACTOR_MAX = 320


class Action(enum.StrEnum):
    SIGNED_IN = "auth.signed_in"
    SIGN_IN_FAILED = "auth.sign_in_failed"
    SIGN_IN_LIMITED = "auth.sign_in_rate_limited"
    SIGNED_OUT = "auth.signed_out"
    CONNECTION_CREATED = "connection.created"
    CONNECTION_EDITED = "connection.edited"
    CONNECTION_SAVED = "connection.saved"
    CONNECTION_SAVE_FAILED = "connection.save_failed"
    CONNECTION_PAUSED = "connection.paused"
    CONNECTION_RESUMED = "connection.resumed"
    CONNECTION_DELETED = "connection.deleted"
    CONNECTION_EXPORT_REQUESTED = "connection.export_requested"
    CONNECTION_DEPLOYED_LOCALLY = "connection.deployed_locally"
    # External ID rotation (lineage_core.setup.rotations); the IDs themselves are never recorded.
    ROTATION_STARTED = "connection.external_id_rotation_started"
    ROTATION_CANCELLED = "connection.external_id_rotation_cancelled"
    ROTATION_VERIFIED = "connection.external_id_rotation_verified"
    ROTATION_COMPLETED = "connection.external_id_rotation_completed"
    API_KEY_CREATED = "api_key.created"
    API_KEY_REVOKED = "api_key.revoked"
    ORGANIZATION_CREATED = "organization.created"
    USER_CREATED = "user.created"
    USER_PASSWORD_CHANGED = "user.password_changed"  # noqa: S105 (an action name)
    USER_DISABLED = "user.disabled"
    USER_ENABLED = "user.enabled"
    QUEUE_ACTION = "queue.action"  # an operator's POST in rq-dashboard (requeue, delete, empty)


# Names that would carry a secret into the trail. "key_prefix" and "kms_key_arn" name no secret.
_SECRET_WORDS = ("password", "secret", "token", "external_id", "externalid", "credential")
_ALLOWED = {"key_prefix", "kms_key_arn"}


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: a signed-in user (id and e-mail), or a label such as "cli" or a typed e-mail."""

    label: str
    user_id: int | None = None
    organization_id: int | None = None


def _check_details(details: dict[str, Any]) -> None:
    for name, value in details.items():
        lowered = name.lower()
        if lowered not in _ALLOWED and (any(word in lowered for word in _SECRET_WORDS) or lowered == "key"):
            raise ValueError(f"audit details must not carry secrets; got a field named {name!r}")
        if isinstance(value, dict):
            _check_details(value)


def record(
    session: Session,
    action: Action,
    actor: Actor,
    *,
    organization_id: int | None = None,
    target_type: str | None = None,
    target_id: int | None = None,
    address: str | None = None,
    request_id: str | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Add one audit row to the session (flushes; the caller commits with the action it records).

    Raises:
        ValueError: ``details`` has a field whose name says it holds a secret.
    """
    if details:
        _check_details(details)
    event = AuditEvent(
        organization_id=organization_id if organization_id is not None else actor.organization_id,
        actor_user_id=actor.user_id,
        actor=actor.label[:ACTOR_MAX],
        action=action.value,
        target_type=target_type,
        target_id=target_id,
        address=(address or None) and address[:64],
        request_id=request_id,
        details=orjson.dumps(details, option=orjson.OPT_SORT_KEYS).decode() if details else None,
    )
    session.add(event)
    session.flush()
    return event


def changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{field: [old, new]}`` for the fields whose value differs."""
    return {name: [before.get(name), value] for name, value in after.items() if before.get(name) != value}


@dataclass(frozen=True, slots=True)
class AuditRow:
    event: AuditEvent
    organization_slug: str | None

    @property
    def details(self) -> dict[str, Any]:
        return orjson.loads(self.event.details) if self.event.details else {}


def search(
    session: Session,
    *,
    organization_id: int | None = None,
    organization_slug: str | None = None,
    actor: str | None = None,
    action: str | None = None,
    limit: int = 200,
    before_id: int | None = None,
) -> list[AuditRow]:
    """Newest first. ``organization_id`` restricts to one organization (an org admin's own);
    ``organization_slug``, ``actor`` (part of the e-mail or label) and ``action`` (exact, or a prefix
    ending in '.') are an operator's filters. ``before_id`` pages back."""
    query = select(AuditEvent, Organization.slug).outerjoin(
        Organization, Organization.id == AuditEvent.organization_id
    )
    if organization_id is not None:
        query = query.where(AuditEvent.organization_id == organization_id)
    if organization_slug:
        query = query.where(Organization.slug == organization_slug.strip().lower())
    if actor:
        escaped = actor.strip().lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(AuditEvent.actor.like(f"%{escaped}%", escape="\\"))
    if action:
        if action.endswith("."):
            query = query.where(AuditEvent.action.startswith(action, autoescape=True))
        else:
            query = query.where(AuditEvent.action == action)
    if before_id is not None:
        query = query.where(AuditEvent.id < before_id)
    query = query.order_by(AuditEvent.id.desc()).limit(limit)
    return [AuditRow(event, slug) for event, slug in session.execute(query)]
