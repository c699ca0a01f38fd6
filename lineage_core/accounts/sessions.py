"""Sessions that end: a signed-in session names the user *and* the user's session version.

Flask's session is a signed cookie held by the browser: signing out only asks the browser to forget
it, and a copy taken before still verifies. So the cookie carries ``"<user id>:<session version>"``
and every request compares the version with the user's row. Signing out, a new password and disabling
the user add one to the version: every copy of every earlier cookie of that user stops working at
once, on every device (signing out signs out everywhere).
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from lineage_core.infra.models import User


def session_token(user: User) -> str:
    """What the session cookie stores for a signed-in user."""
    return f"{user.id}:{user.session_version}"


def user_for_token(session: Session, token: str) -> User | None:
    """The user a session token still signs in, or None (malformed, stale version, disabled, gone)."""
    user_id, separator, version = token.partition(":")
    if not separator or not user_id.isascii() or not user_id.isdigit() or not version.isascii():
        return None
    if not version.isdigit() or len(user_id) > 10 or len(version) > 10:
        return None
    user = session.get(User, int(user_id))
    if user is None or user.disabled_at is not None or user.session_version != int(version):
        return None
    return user


def end_sessions(session: Session, user_id: int) -> None:
    """End every session of the user (flushes; the caller commits)."""
    session.execute(
        update(User)
        .where(User.id == user_id)
        .values(session_version=User.session_version + 1)
        .execution_options(synchronize_session="fetch")
    )
