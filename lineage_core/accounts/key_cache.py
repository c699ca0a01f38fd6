"""API keys that authenticated recently, held in memory so that an ingest request skips the key's lookup.

Every ingest request carries its key, and looking it up cost a statement, a commit and a pooled
connection per request (measured: 0.5 ms of the web worker's CPU per request, a sixth of a single
event's). Here a key that authenticated is remembered by its hash for :data:`MAX_AGE_SECONDS`, with
what the request needs of it (its caller and its organization's slug).

A revocation takes effect in every process as soon as PostgreSQL delivers its notification
(milliseconds after the revoking transaction commits):

* :func:`note_key_change` (called by :func:`lineage_core.accounts.api_keys.revoke_api_key`) clears this
  process's caches, and again once the transaction commits, and sends ``NOTIFY`` on :data:`CHANNEL` in
  the revoking transaction; PostgreSQL delivers it when that transaction commits.
* Each process listens on :data:`CHANNEL` from a thread of its own, on a connection of its own (one more
  per web worker; a direct one: behind a pooler in transaction mode LISTEN hears nothing), and clears
  its cache on every notification. While that thread is not listening (not started yet, its connection
  lost, the database down) the cache answers nothing and keeps nothing: every request looks its key
  up, as without a cache, so a revocation it could have missed is never served from memory. A network
  that fails silently is noticed by TCP keepalives within about 10 s; until then, and in any case, no
  key is served from memory longer than :data:`MAX_AGE_SECONDS`.
* A lookup that began before a clear does not fill the cache after it (a generation count): it may
  have read the key before the revocation committed.
* A key changed other than through :func:`note_key_change` (by hand in SQL, a restored backup) stays
  known for up to a minute, unless the change is followed by ``SELECT pg_notify('olx_api_keys', '')``.

Only keys that authenticated are kept: a bad key is looked up every time (and counts towards the
bad-key limits). PostgreSQL only; on SQLite (the local demo, one process) there is no cache.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from psycopg.conninfo import make_conninfo
from sqlalchemy import event, text
from sqlalchemy.orm import Session

if TYPE_CHECKING:  # api_keys imports this module (revocation notifies)
    from lineage_core.accounts.api_keys import Caller

log = logging.getLogger(__name__)

CHANNEL = "olx_api_keys"
# The listener's connection as pg_stat_activity shows it.
APPLICATION_NAME = "api-key-cache"
# How long a key is served from memory, at most: a bound on what a lost notification could leave
# behind (a silent network failure that neither side noticed yet), not the way revocation works.
MAX_AGE_SECONDS = 60.0
# A process serves few organizations' keys; the bound only stops a flood of valid keys growing memory.
MAX_ENTRIES = 10_000
# How long the listener waits for a notification before it checks its connection (and its stop).
_POLL_SECONDS = 2.0
# A connection whose network failed silently (no reset, no FIN) is noticed in about 10 s rather than
# the kernel's minutes, during which notifications would be lost while the cache still served keys.
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 10_000,
}
_RECONNECT_PAUSES = (1.0, 2.0, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class KnownKey:
    """What an ingest request needs of its key: who it acts for, and its organization's slug (for the
    ``X-Organization`` check)."""

    caller: Caller
    organization_slug: str | None  # None: not read (a lookup whose key is not kept)


class KeyCache:
    """One process's keys for one database, served only while its listener is listening."""

    def __init__(self, database_url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._conninfo = make_conninfo(
            database_url.replace("postgresql+psycopg://", "postgresql://", 1),
            connect_timeout=5,
            application_name=APPLICATION_NAME,
            **_KEEPALIVES,
        )
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, KnownKey]] = {}
        self._generation = 0
        self._listening = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lookups_saved = 0  # statistics, for tests and benchmarks

    # -- the requests' side ---------------------------------------------------------------------

    def get(self, key_hash: str) -> KnownKey | None:
        with self._lock:
            known = self._fresh(key_hash)
            if known is not None:
                self.lookups_saved += 1
            return known

    def knows(self, key_hash: str) -> bool:
        """Whether :meth:`get` would answer the key (without counting a lookup saved)."""
        with self._lock:
            return self._fresh(key_hash) is not None

    def _fresh(self, key_hash: str) -> KnownKey | None:
        """The key, if served (listening, and kept for less than MAX_AGE_SECONDS); the lock is held."""
        found = self._entries.get(key_hash) if self._listening else None
        if found is None:
            return None
        stored_at, known = found
        if self._clock() - stored_at > MAX_AGE_SECONDS:
            del self._entries[key_hash]
            return None
        return known

    def generation(self) -> int:
        """Take it before looking a key up; :meth:`put` keeps the key only if no clear came since."""
        with self._lock:
            return self._generation

    def put(self, key_hash: str, known: KnownKey, generation: int) -> None:
        with self._lock:
            if not self._listening or generation != self._generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key_hash] = (self._clock(), known)

    def note_use(self, key_hash: str, used_at: datetime) -> None:
        """The key's ``last_used_at`` was just written: the cached caller carries it (so that the next
        requests do not write it again within the minute)."""
        with self._lock:
            found = self._entries.get(key_hash)
            if found is not None:
                stored_at, known = found
                caller = replace(known.caller, last_used_at=used_at)
                self._entries[key_hash] = (stored_at, replace(known, caller=caller))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._generation += 1

    @property
    def listening(self) -> bool:
        with self._lock:
            return self._listening

    # -- the listener ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start listening (once); until the listener is connected the cache serves nothing."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._listen, name="api-key-cache", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _set_listening(self, listening: bool) -> None:
        # Cleared on both edges: what was kept before an outage may predate a revocation it missed.
        with self._lock:
            self._entries.clear()
            self._generation += 1
            self._listening = listening

    def _listen(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self._set_listening(True)
                    if failures:
                        log.info("API key cache listening again")
                    failures = 0
                    while not self._stop.is_set():
                        for _notification in connection.notifies(timeout=_POLL_SECONDS, stop_after=1):
                            self.clear()
                        connection.execute("SELECT 1")  # a connection lost quietly is noticed here
            except Exception as error:  # whatever it was: listen again (the cache is off meanwhile)
                if failures == 0:
                    log.warning(
                        "API key cache stopped listening (%s); every request looks its key up until it "
                        "listens again",
                        type(error).__name__,
                        exc_info=not isinstance(error, psycopg.Error),  # not the database's: a defect
                    )
                failures += 1
            finally:
                self._set_listening(False)
            if failures:
                self._stop.wait(_RECONNECT_PAUSES[min(failures, len(_RECONNECT_PAUSES)) - 1])


# One cache per database per process: a forked process (a web worker) starts its own, since the
# listener thread and its connection do not survive the fork.
_CACHES: dict[tuple[int, str], KeyCache] = {}
_CACHES_LOCK = threading.Lock()
_ALL: weakref.WeakSet[KeyCache] = weakref.WeakSet()


def cache_for(database_url: str) -> KeyCache | None:
    """This process's cache for the database (its listener started); None on SQLite."""
    if not database_url.startswith("postgresql"):
        return None
    key = (os.getpid(), database_url)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = KeyCache(database_url)
            _ALL.add(cache)
    cache.start()
    return cache


def clear_all() -> None:
    """Forget every key this process holds (a database emptied or restored under it)."""
    for cache in list(_ALL):
        cache.clear()


def note_key_change(session: Session) -> None:
    """A key changed in ``session``'s transaction: every process forgets every key it holds, this one
    now and again when the transaction commits (a request may have read the key meanwhile, before the
    change was visible), the others when PostgreSQL delivers the NOTIFY it sends at commit."""
    clear_all()
    event.listen(session, "after_commit", lambda _session: clear_all(), once=True)
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
