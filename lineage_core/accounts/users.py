"""The people who sign in: org admins and operators, their passwords, and the sign-in check."""

from __future__ import annotations

import re
from functools import cache

from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.passwords import check_password
from lineage_core.accounts.sessions import end_sessions
from lineage_core.infra.models import Organization, Role, User, utcnow

# Printable ASCII without '@' or spaces on either side of the '@' (\x21-\x3f and \x41-\x7e): "[^@\s]"
# would also take non-ASCII letters and Unicode spaces.
_PART = r"[\x21-\x3f\x41-\x7e]+"
_EMAIL = re.compile(rf"\A{_PART}@{_PART}\.{_PART}\Z", re.ASCII)
# werkzeug's default (scrypt). The test suite lowers the cost; the stored hash names its own method,
# so checking works whatever method a hash was made with.
PASSWORD_HASH_METHOD = "scrypt"  # noqa: S105 (a method name, not a password)


@cache
def _dummy_hash() -> str:
    """Checked against when the e-mail is unknown, so a wrong e-mail costs as long as a wrong password.

    Made on first use, not at import: an scrypt hash costs a third of a second, which every process and
    CLI call would otherwise pay at start.
    """
    return generate_password_hash("not-a-real-password-used-for-timing", method=PASSWORD_HASH_METHOD)


def create_user(
    session: Session, email: str, password: str, role: Role, organization: Organization | None
) -> User:
    email = email.strip().lower()
    if not _EMAIL.fullmatch(email):
        raise AccountError(f"{email!r} is not an e-mail address.")
    check_password(password, email)
    if role is Role.ORG_ADMIN and organization is None:
        raise AccountError("An org admin must belong to an organization.")
    if role is Role.OPERATOR and organization is not None:
        raise AccountError("Operators are vendor staff and belong to no organization.")
    if session.scalar(select(User).where(User.email == email)) is not None:
        raise AccountError(f"A user with e-mail {email!r} already exists.")
    user = User(
        email=email,
        password_hash=generate_password_hash(password, method=PASSWORD_HASH_METHOD),
        role=role,
        organization_id=organization.id if organization else None,
    )
    session.add(user)
    session.flush()
    return user


def authenticate(session: Session, email: str, password: str) -> User | None:
    """The user with this e-mail and password, or None. Takes as long for an unknown e-mail.

    A disabled user is refused like a wrong password (after the same hash check).
    """
    user = find_user(session, email)
    if user is None:
        check_password_hash(_dummy_hash(), password)
        return None
    if not check_password_hash(user.password_hash, password) or user.disabled_at is not None:
        return None
    return user


def find_user(session: Session, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == email.strip().lower()))


def get_user(session: Session, email: str) -> User:
    """Raises:
    AccountError: no user has this e-mail.
    """
    user = find_user(session, email)
    if user is None:
        raise AccountError(f"No user {email.strip().lower()!r}.")
    return user


def change_password(session: Session, user: User, password: str) -> None:
    """Set a new password (checked by the policy) and end every session of the user. Caller commits.

    Raises:
        AccountError: the password breaks the policy.
    """
    check_password(password, user.email)
    user.password_hash = generate_password_hash(password, method=PASSWORD_HASH_METHOD)
    session.flush()
    end_sessions(session, user.id)


def set_disabled(session: Session, user: User, disabled: bool) -> bool:
    """Disable (ending every session) or enable the user; True if that changed anything. Caller commits."""
    if disabled == (user.disabled_at is not None):
        return False
    user.disabled_at = utcnow() if disabled else None
    session.flush()
    if disabled:
        end_sessions(session, user.id)
    return True
