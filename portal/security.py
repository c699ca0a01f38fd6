"""Login on every page, the current user's loader, and the role checks views use."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from flask import Flask, abort, request
from flask_login import UserMixin, current_user

from lineage_core.accounts.sessions import session_token, user_for_token
from lineage_core.infra.models import Role, User
from portal.database import get_db
from portal.extensions import login_manager

# Endpoints reachable without a session: the login form itself and static files.
PUBLIC_ENDPOINTS = {"auth.login", "static"}

F = TypeVar("F", bound=Callable[..., Any])


class PortalUser(UserMixin):
    """The signed-in user as Flask-Login sees it: a detached copy of the row's fields."""

    def __init__(self, user: User) -> None:
        # What the session cookie stores: the id and the session version (lineage_core.accounts.sessions).
        self.id = session_token(user)
        self.user_id = user.id
        self.email = user.email
        self.role = user.role
        self.organization_id = user.organization_id

    @property
    def is_operator(self) -> bool:
        return self.role is Role.OPERATOR

    @property
    def is_org_admin(self) -> bool:
        return self.role is Role.ORG_ADMIN


@login_manager.user_loader
def _load_user(token: str) -> PortalUser | None:
    # A cookie from before sign-out, a password change or the user's disabling names an older session
    # version: it signs in no one, whoever holds a copy of it.
    user = user_for_token(get_db(), token)
    return PortalUser(user) if user else None


def _require_login() -> Any:
    # Deny by default: a new view is protected even if its author forgets a decorator. Endpoints
    # that authenticate another way (the ingest API's bearer keys) mark themselves public_endpoint.
    if request.endpoint is None or request.endpoint in PUBLIC_ENDPOINTS:
        return None
    view = current_view()
    if view is not None and getattr(view, "_public", False):
        return None
    if not current_user.is_authenticated:
        return login_manager.unauthorized()
    return None


def current_view() -> Callable[..., Any] | None:
    from flask import current_app

    return current_app.view_functions.get(request.endpoint or "")


def public_endpoint(view: F) -> F:
    """Exempts a view from the session login (it must authenticate requests itself)."""
    view._public = True  # type: ignore[attr-defined]
    return view


def org_admin_required(view: F) -> F:
    """Only org admins: the pages that read or change an organization's own data."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not current_user.is_authenticated or not current_user.is_org_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def operator_required(view: F) -> F:
    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not current_user.is_authenticated or not current_user.is_operator:
            abort(403)
        return view(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def init_app(app: Flask) -> None:
    app.before_request(_require_login)
