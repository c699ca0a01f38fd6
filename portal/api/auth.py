"""API-key authentication of the connections API: who calls, for which organization, with which scope.

Every view of ``portal.api.connections`` is wrapped by :func:`api_key_required`: a missing, invalid or
revoked key is a 401 (and counts towards the bad-key limits of :mod:`portal.limits`, as on the ingest
endpoint: per address, and per key prefix once a prefix has failed too often); a key of another
organization than ``X-Organization`` says is a 403 ``wrong_organization``; a key without the view's
scope a 403 ``insufficient_scope`` naming it; a database that does not answer a 503 with Retry-After.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from functools import wraps
from typing import Any, TypeVar

from flask import Response, g, request
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from lineage_core.accounts.api_keys import (
    AuthenticationError,
    Caller,
    Scope,
    ScopeError,
    authenticate,
    key_prefix_of,
    parse_bearer,
    record_use,
    require_scope,
)
from lineage_core.infra.models import Organization
from lineage_core.ops.audit import Actor
from portal.api.responses import ApiError, answer
from portal.database import get_db
from portal.limits import api_key_address_limit, bad_key_refused_for_prefix, count_failure
from portal.security import public_endpoint

ORG_HEADER = "X-Organization"
RETRY_AFTER_SECONDS = "5"

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class _RateLimitedError(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__("rate limited")
        self.response = response


def current_caller() -> Caller:
    """The caller of this request (set by :func:`api_key_required`)."""
    caller: Caller = g.api_caller
    return caller


def current_api_actor() -> Actor:
    """Who the audit trail says acted: the key, by its prefix (never the secret), for its organization."""
    caller = current_caller()
    return Actor(caller.prefix, None, caller.organization_id)


def _credential() -> str:
    scheme, _, credential = (request.headers.get("Authorization") or "").strip().partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else ""


def _authenticated(scope: Scope) -> Caller:
    db = get_db()
    try:
        caller = authenticate(db, parse_bearer(request.headers.get("Authorization")))
    except AuthenticationError as error:
        count_failure("api_key")
        prefix = key_prefix_of(_credential())
        refused = bad_key_refused_for_prefix(prefix) if prefix else None
        if refused is not None:
            raise _RateLimitedError(refused) from None
        raise ApiError.one(401, error.reason.value, "Authorization", str(error)) from None
    expected_org = request.headers.get(ORG_HEADER)
    if expected_org is not None:
        slug = db.scalar(select(Organization.slug).where(Organization.id == caller.organization_id))
        if slug != expected_org.strip():
            raise ApiError.one(
                403,
                "wrong_organization",
                ORG_HEADER,
                f"This API key belongs to another organization than {expected_org.strip()!r}; "
                "use a key created in that organization.",
            )
    try:
        require_scope(caller, scope)
    except ScopeError as error:
        raise ApiError.one(403, "insufficient_scope", "Authorization", str(error)) from None
    if record_use(db, caller):
        db.commit()
    return caller


def api_key_required(scope: Scope) -> Callable[[F], F]:
    """The view answers only a valid key of the caller's organization that has ``scope``."""

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                g.api_caller = _authenticated(scope)
                return view(*args, **kwargs)
            except _RateLimitedError as limited:
                return limited.response
            except ApiError as error:
                return answer(error)
            except DBAPIError:
                log.exception("a connections API call failed on the database")
                with suppress(DBAPIError):
                    get_db().rollback()
                return answer(
                    ApiError.one(
                        503,
                        "database_unavailable",
                        "body",
                        "The database did not answer; try the call again in a moment.",
                        **{"Retry-After": RETRY_AFTER_SECONDS},
                    )
                )

        # The session login does not apply: the key authenticates every request (and no cookie is read).
        return public_endpoint(api_key_address_limit(wrapper))  # type: ignore[return-value]

    return decorate
