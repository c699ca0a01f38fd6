"""Organization API keys for the ingest API: create (the secret is shown once), list, revoke, authenticate.

A key looks like ``olk_1a2b3c4d_<43 random URL-safe characters>``. The first 12 characters (``olk_`` and
8 random hex digits) are its *prefix*, stored in clear so admins can tell their keys apart; the whole key
is stored only as its SHA-256.

Why SHA-256 and not a password hash (bcrypt, scrypt): the secret part carries 256 random bits, so a
stolen table of hashes cannot be brute-forced whatever the hash's speed; slow salted hashes exist for
low-entropy human passwords. A fast unsalted hash also lets a request find its key with one indexed
equality lookup (``key_hash`` is unique), where a salted slow hash would cost ~100 ms of CPU on every
ingested event.
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lineage_core.infra.models import ApiKey, utcnow

KEY_PREFIX = "olk_"
NAME_MAX = 200
_KEY = re.compile(r"\Aolk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}\Z", re.ASCII)
_PREFIX_CHARS = len(KEY_PREFIX) + 8
# last_used_at is informative; writing it on every event would make all concurrent requests of one
# producer queue on the key's row lock.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyError(ValueError):
    """A key cannot be created as asked; the message says why."""


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


@dataclass(frozen=True, slots=True)
class Caller:
    """The organization a request acts for, and the key it used."""

    organization_id: int
    api_key_id: int
    last_used_at: datetime | None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_api_key(session: Session, organization_id: int, name: str) -> NewApiKey:
    """Create a key for the organization (flushes; the caller commits).

    Raises:
        ApiKeyError: the name is empty or longer than 200 characters.
    """
    name = name.strip()
    if not name or len(name) > NAME_MAX:
        raise ApiKeyError(f"Give the key a name of 1 to {NAME_MAX} characters, such as 'airflow-prod'.")
    prefix = f"{KEY_PREFIX}{secrets.token_hex(4)}"
    secret = f"{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey(organization_id=organization_id, name=name, prefix=prefix, key_hash=hash_key(secret))
    session.add(key)
    session.flush()
    return NewApiKey(id=key.id, name=name, prefix=prefix, secret=secret)


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
    return key


def key_prefix_of(key: str) -> str | None:
    """The prefix (``olk_`` and 8 hex digits) of a well-formed key; None for anything else."""
    return key[:_PREFIX_CHARS] if _KEY.match(key) else None


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
    scheme, _, credential = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise AuthenticationError(AuthFailure.INVALID, "The Authorization header must be 'Bearer <API key>'.")
    return credential.strip()


def authenticate(session: Session, key: str) -> Caller:
    """The organization the key belongs to.

    Raises:
        AuthenticationError: the key is malformed, unknown, or revoked.
    """
    # A well-formed key is checked before any query, so garbage never reaches the database.
    if not _KEY.match(key):
        raise AuthenticationError(AuthFailure.INVALID, "The API key is not valid.")
    row = session.execute(
        select(ApiKey.id, ApiKey.organization_id, ApiKey.revoked_at, ApiKey.last_used_at).where(
            ApiKey.key_hash == hash_key(key)
        )
    ).one_or_none()
    if row is None:
        raise AuthenticationError(AuthFailure.INVALID, "The API key is not valid.")
    if row.revoked_at is not None:
        raise AuthenticationError(
            AuthFailure.REVOKED,
            f"The API key {key[:_PREFIX_CHARS]}... was revoked; ask an org admin for a new one.",
        )
    return Caller(organization_id=row.organization_id, api_key_id=row.id, last_used_at=row.last_used_at)


def record_use(session: Session, caller: Caller, now: datetime | None = None) -> bool:
    """Set the key's last_used_at if it is older than a minute (caller commits). True if written."""
    now = now or utcnow()
    if caller.last_used_at is not None and now - caller.last_used_at < LAST_USED_RESOLUTION:
        return False
    session.execute(update(ApiKey).where(ApiKey.id == caller.api_key_id).values(last_used_at=now))
    return True
