"""Organization API keys for the API: create (the secret is shown once), list, revoke, authenticate.

A key looks like ``olk_1a2b3c4d_<43 random URL-safe characters>``. The first 12 characters (``olk_`` and
8 random hex digits) are its *prefix*, stored in clear so admins can tell their keys apart; the whole key
is stored only as its SHA-256.

Why SHA-256 and not a password hash (bcrypt, scrypt): the secret part carries 256 random bits, so a
stolen table of hashes cannot be brute-forced whatever the hash's speed; slow salted hashes exist for
low-entropy human passwords. A fast unsalted hash also lets a request find its key with one indexed
equality lookup (``key_hash`` is unique), where a salted slow hash would cost ~100 ms of CPU on every
ingested event.

Scopes: each key carries the scopes an org admin gave it (``lineage:write`` for ingest, the default and
what every key created before scopes existed has; ``connections:read``; ``connections:write``, which
implies read). They are stored as one space-separated string, the OAuth 2.0 ``scope`` notation
(RFC 6749, 3.3), so the column is portable between PostgreSQL and SQLite.
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from lineage_core.accounts import key_cache
from lineage_core.infra.models import ApiKey, utcnow

KEY_PREFIX = "olk_"
NAME_MAX = 200
_KEY = re.compile(r"\Aolk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}\Z", re.ASCII)
_PREFIX_CHARS = len(KEY_PREFIX) + 8
# last_used_at is informative; writing it on every event would make all concurrent requests of one
# producer queue on the key's row lock.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyError(ValueError):
    """A key cannot be created as asked; the message says why and ``field`` which input is at fault."""

    def __init__(self, message: str, field: str = "name") -> None:
        super().__init__(message)
        self.field = field


class Scope(enum.StrEnum):
    """What a key may do. Values are what the API, the portal and the database spell."""

    LINEAGE_WRITE = "lineage:write"
    CONNECTIONS_READ = "connections:read"
    CONNECTIONS_WRITE = "connections:write"


DEFAULT_SCOPES: frozenset[Scope] = frozenset({Scope.LINEAGE_WRITE})
# A scope also grants these: whoever may change connections may read them.
_IMPLIES: dict[Scope, frozenset[Scope]] = {Scope.CONNECTIONS_WRITE: frozenset({Scope.CONNECTIONS_READ})}


class ScopeError(Exception):
    """The key lacks the scope a call needs; ``scope`` names it."""

    def __init__(self, scope: Scope) -> None:
        super().__init__(f"This API key may not {scope}; an org admin can create a key with that scope.")
        self.scope = scope


class AuthFailure(enum.StrEnum):
    MISSING = "missing_api_key"
    INVALID = "invalid_api_key"
    REVOKED = "revoked_api_key"


class AuthenticationError(Exception):
    """The presented key does not authenticate a request; ``reason`` says why."""

    def __init__(self, reason: AuthFailure, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class NewApiKey:
    """A key just created. ``secret`` is the full key: show it once, it cannot be recovered later."""

    id: int
    name: str
    prefix: str
    secret: str
    scopes: frozenset[Scope]


@dataclass(frozen=True, slots=True)
class Caller:
    """The organization a request acts for, and the key it used."""

    organization_id: int
    api_key_id: int
    last_used_at: datetime | None
    scopes: frozenset[Scope]
    # The key's prefix (``olk_`` and 8 hex digits): the audit trail's actor for what the key does.
    prefix: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def parse_scopes(text: str) -> frozenset[Scope]:
    """The scopes of a stored space-separated scope string.

    Raises:
        ApiKeyError: the string names no scope or an unknown one.
    """
    return _as_scopes(text.split())


def format_scopes(scopes: Iterable[Scope]) -> str:
    """The stored form: space-separated, in a stable order."""
    return " ".join(sorted(str(scope) for scope in scopes))


def _as_scopes(names: Iterable[str]) -> frozenset[Scope]:
    known = {str(scope) for scope in Scope}
    names = list(names)
    unknown = sorted(set(names) - known)
    if unknown:
        raise ApiKeyError(
            f"Unknown scope {unknown[0]!r}; a key's scopes are {', '.join(sorted(known))}.", "scopes"
        )
    if not names:
        raise ApiKeyError(f"Give the key at least one scope: {', '.join(sorted(known))}.", "scopes")
    return frozenset(Scope(name) for name in names)


def granted(scopes: Iterable[Scope]) -> frozenset[Scope]:
    """The scopes a key may use: its own and those they imply."""
    own = frozenset(scopes)
    return own.union(*(_IMPLIES.get(scope, frozenset()) for scope in own))


def require_scope(caller: Caller, scope: Scope) -> None:
    """Refuse a call the caller's key is not scoped for.

    Raises:
        ScopeError: the key lacks the scope (and no scope of it implies it).
    """
    if scope not in granted(caller.scopes):
        raise ScopeError(scope)


def create_api_key(
    session: Session, organization_id: int, name: str, scopes: Iterable[Scope | str] = DEFAULT_SCOPES
) -> NewApiKey:
    """Create a key for the organization with the given scopes (flushes; the caller commits).

    Raises:
        ApiKeyError: the name is empty or longer than 200 characters, or the scopes are empty or unknown.
    """
    name = name.strip()
    if not name or len(name) > NAME_MAX:
        raise ApiKeyError(f"Give the key a name of 1 to {NAME_MAX} characters, such as 'airflow-prod'.")
    chosen = _as_scopes(str(scope) for scope in scopes)
    prefix = f"{KEY_PREFIX}{secrets.token_hex(4)}"
    secret = f"{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey(
        organization_id=organization_id,
        name=name,
        prefix=prefix,
        key_hash=hash_key(secret),
        scopes=format_scopes(chosen),
    )
    session.add(key)
    session.flush()
    return NewApiKey(id=key.id, name=name, prefix=prefix, secret=secret, scopes=chosen)


def list_api_keys(session: Session, organization_id: int) -> list[ApiKey]:
    """The organization's keys, active first, newest first."""
    query = (
        select(ApiKey)
        .where(ApiKey.organization_id == organization_id)
        .order_by(ApiKey.revoked_at.is_not(None), ApiKey.created_at.desc(), ApiKey.id.desc())
    )
    return list(session.scalars(query))


def revoke_api_key(session: Session, organization_id: int, key_id: int) -> ApiKey | None:
    """Revoke one of the organization's keys (idempotent); None if it has no such key. Caller commits."""
    key = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.organization_id == organization_id))
    if key is not None and key.revoked_at is None:
        key.revoked_at = utcnow()
        session.flush()
        key_cache.note_key_change(session)  # every process forgets it once this commits
    return key


def key_prefix_of(key: str) -> str | None:
    """The prefix (``olk_`` and 8 hex digits) of a well-formed key; None for anything else."""
    return key[:_PREFIX_CHARS] if _KEY.match(key) else None


def bearer_credential(header: str | None) -> str:
    """The key in an ``Authorization: Bearer <key>`` header; "" if the header is not one."""
    scheme, _, credential = (header or "").strip().partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else ""


def parse_bearer(header: str | None) -> str:
    """The key in an ``Authorization: Bearer <key>`` header.

    Raises:
        AuthenticationError: the header is missing or not a Bearer credential.
    """
    if not header or not header.strip():
        raise AuthenticationError(
            AuthFailure.MISSING,
            "Send an API key in the Authorization header: 'Authorization: Bearer olk_...'. "
            "Org admins create keys in the portal under API keys.",
        )
    credential = bearer_credential(header)
    if not credential:
        raise AuthenticationError(AuthFailure.INVALID, "The Authorization header must be 'Bearer <API key>'.")
    return credential


_KEY_BY_HASH = select(
    ApiKey.id,
    ApiKey.organization_id,
    ApiKey.revoked_at,
    ApiKey.last_used_at,
    ApiKey.prefix,
    ApiKey.scopes,
).where(ApiKey.key_hash == bindparam("key_hash"))


def authenticate(session: Session, key: str) -> Caller:
    """The organization the key belongs to.

    Raises:
        AuthenticationError: the key is malformed, unknown, or revoked.
    """
    # A well-formed key is checked before any query, so garbage never reaches the database.
    if not _KEY.match(key):
        raise AuthenticationError(AuthFailure.INVALID, "The API key is not valid.")
    # A Core statement on the session's connection (same transaction): every ingest request makes this
    # lookup, and the ORM's execution of the same SELECT cost about as much again as the query itself.
    row = session.connection().execute(_KEY_BY_HASH, {"key_hash": hash_key(key)}).one_or_none()
    if row is None:
        raise AuthenticationError(AuthFailure.INVALID, "The API key is not valid.")
    if row.revoked_at is not None:
        raise AuthenticationError(
            AuthFailure.REVOKED,
            f"The API key {key[:_PREFIX_CHARS]}... was revoked; ask an org admin for a new one.",
        )
    return Caller(
        organization_id=row.organization_id,
        api_key_id=row.id,
        last_used_at=row.last_used_at,
        scopes=parse_scopes(row.scopes),
        prefix=row.prefix,
    )


def record_use(session: Session, caller: Caller, now: datetime | None = None) -> bool:
    """Set the key's last_used_at if it is older than a minute (caller commits). True if written."""
    now = now or utcnow()
    if caller.last_used_at is not None and now - caller.last_used_at < LAST_USED_RESOLUTION:
        return False
    session.execute(update(ApiKey).where(ApiKey.id == caller.api_key_id).values(last_used_at=now))
    return True
