"""The ingest endpoints' API key cache (lineage_core/accounts/key_cache.py), on a real PostgreSQL: a key
that authenticated is not looked up again, and a revocation takes effect as soon as it commits, in this
process and in any other, even across a lost listener connection."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask.testing import FlaskClient
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from lineage_core.accounts import key_cache
from lineage_core.accounts.api_keys import authenticate, hash_key, revoke_api_key
from lineage_core.accounts.key_cache import APPLICATION_NAME, MAX_AGE_SECONDS, KeyCache, KnownKey, cache_for
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine
from lineage_core.infra.models import ApiKey, Organization
from tests.factories import make_key, orders_event
from tests.faults import wait_for
from tests.key_cache import listening_key_cache
from tests.services import process_env

URL = "/api/v1/lineage"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def key_lookups(settings: Settings) -> Iterator[list[str]]:
    """The statements on the app's engine that read the api_keys table."""
    engine = get_engine(settings.database_url)
    seen: list[str] = []

    def statement(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        if "FROM api_keys" in sql:
            seen.append(sql)

    event.listen(engine, "before_cursor_execute", statement)
    yield seen
    event.remove(engine, "before_cursor_execute", statement)


def post(client: FlaskClient, key: str, **headers: str) -> Any:
    return client.post(URL, json=orders_event(), headers={"Authorization": f"Bearer {key}", **headers})


def known_key(
    client: FlaskClient, db: Session, org: Organization, settings: Settings
) -> tuple[KeyCache, str]:
    """The listening cache and a new key that a request has authenticated, so that the cache holds it."""
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    assert post(client, key).status_code == 201
    assert cache.get(hash_key(key)) is not None
    return cache, key


def key_id(db: Session, secret: str) -> int:
    found = db.query(ApiKey).filter(ApiKey.key_hash == hash_key(secret)).one()
    db.rollback()
    return found.id


def test_a_key_that_authenticated_is_not_looked_up_again(
    client: FlaskClient, db: Session, org: Organization, settings: Settings, key_lookups: list[str]
) -> None:
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    assert post(client, key).status_code == 201
    assert len(key_lookups) == 1
    saved = cache.lookups_saved
    for _ in range(3):
        assert post(client, key).status_code == 201
        assert post(client, key, **{"X-Organization": "acme"}).status_code == 201
    assert len(key_lookups) == 1  # the organization's slug is known too
    assert cache.lookups_saved == saved + 6
    # The cached organization is still checked against X-Organization.
    refused = post(client, key, **{"X-Organization": "globex"})
    assert (refused.status_code, refused.get_json()["error"]) == (403, "wrong_organization")


def test_a_bad_key_is_looked_up_every_time(
    client: FlaskClient, db: Session, org: Organization, settings: Settings, key_lookups: list[str]
) -> None:
    listening_key_cache(settings.database_url)
    unknown = "olk_0badc0de_" + "A" * 43
    for _ in range(3):
        assert post(client, unknown).status_code == 401
    assert len(key_lookups) == 3


def test_a_key_revoked_in_this_process_is_refused_by_the_next_request(
    client: FlaskClient, db: Session, org: Organization, settings: Settings
) -> None:
    _cache, key = known_key(client, db, org, settings)  # the next request would be answered from memory

    assert revoke_api_key(db, org.id, key_id(db, key)) is not None
    db.commit()

    refused = post(client, key)
    assert (refused.status_code, refused.get_json()["error"]) == (401, "revoked_api_key")


_REVOKE_ELSEWHERE = """
import sys
from lineage_core.accounts.api_keys import revoke_api_key
from lineage_core.infra.db import session_scope
with session_scope(sys.argv[1]) as session:
    assert revoke_api_key(session, int(sys.argv[2]), int(sys.argv[3])) is not None
"""


def test_a_key_revoked_by_another_process_is_forgotten_when_its_revocation_commits(
    client: FlaskClient, db: Session, org: Organization, settings: Settings
) -> None:
    cache, key = known_key(client, db, org, settings)
    generation = cache.generation()

    # Another process (a portal worker where the admin pressed Revoke): only its NOTIFY reaches here.
    subprocess.run(
        [sys.executable, "-c", _REVOKE_ELSEWHERE, settings.database_url, str(org.id), str(key_id(db, key))],
        env=process_env(settings),
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    wait_for(lambda: cache.generation() != generation, "the revocation's notification")
    assert cache.get(hash_key(key)) is None
    refused = post(client, key)
    assert (refused.status_code, refused.get_json()["error"]) == (401, "revoked_api_key")


def test_a_cache_whose_listener_lost_its_connection_serves_nothing_it_held(
    client: FlaskClient,
    db: Session,
    org: Organization,
    settings: Settings,
    key_lookups: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Long enough that the listener is still away while the test posts (it pauses before reconnecting).
    monkeypatch.setattr(key_cache, "_RECONNECT_PAUSES", (5.0,))
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    assert post(client, key).status_code == 201
    generation = cache.generation()

    # The listener's connection ends (a database restart, a network cut): a notification sent meanwhile
    # would be lost, so what the cache held is dropped and every request looks its key up again.
    plain = settings.database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            (APPLICATION_NAME,),
        ).fetchall()
    assert ended and all(terminated for (terminated,) in ended)
    wait_for(lambda: cache.generation() != generation, "the listener noticing its lost connection")
    assert cache.get(hash_key(key)) is None

    key_lookups.clear()
    assert post(client, key).status_code == 201
    assert len(key_lookups) == 1
    listening_key_cache(settings.database_url)  # it connects again, and keeps keys again
    assert post(client, key).status_code == 201
    assert post(client, key).status_code == 201
    assert len(key_lookups) == 2


def test_a_lookup_that_began_before_a_revocation_does_not_fill_the_cache(
    db: Session, org: Organization, settings: Settings
) -> None:
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    generation = cache.generation()
    known = KnownKey(authenticate(db, key), "acme")  # read before the revocation committed
    db.rollback()
    assert revoke_api_key(db, org.id, key_id(db, key)) is not None
    db.commit()
    cache.put(hash_key(key), known, generation)
    assert cache.get(hash_key(key)) is None


def test_a_key_is_served_from_memory_for_a_minute_at_most(
    db: Session, org: Organization, settings: Settings
) -> None:
    now = [1000.0]
    cache = KeyCache(settings.database_url, clock=lambda: now[0])
    cache.start()
    try:
        wait_for(lambda: cache.listening, "the cache to listen")
        key = make_key(db, org)
        known = KnownKey(authenticate(db, key), "acme")
        db.rollback()
        cache.put(hash_key(key), known, cache.generation())
        now[0] += MAX_AGE_SECONDS
        assert cache.get(hash_key(key)) == known
        now[0] += 1
        assert cache.get(hash_key(key)) is None
    finally:
        cache.stop()
    assert not cache.listening


def test_a_cache_not_listening_keeps_nothing(db: Session, org: Organization, settings: Settings) -> None:
    cache = KeyCache(settings.database_url)  # never started: it cannot hear of a revocation
    key = make_key(db, org)
    known = KnownKey(authenticate(db, key), "acme")
    db.rollback()
    cache.put(hash_key(key), known, cache.generation())
    assert cache.get(hash_key(key)) is None


def test_the_last_use_written_is_carried_by_the_cached_key(
    client: FlaskClient, db: Session, org: Organization, settings: Settings
) -> None:
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    assert post(client, key).status_code == 201  # looked up with last_used_at empty, then written
    cached = cache.get(hash_key(key))
    assert cached is not None and cached.caller.last_used_at is not None
    stored = db.query(ApiKey).filter(ApiKey.key_hash == hash_key(key)).one()
    assert stored.last_used_at is not None


@pytest.fixture
def last_use_fails_at_commit(db: Session) -> Iterator[None]:
    """Every transaction that writes an API key's last use fails at its COMMIT (a deferred trigger)."""
    db.execute(
        text(
            "CREATE FUNCTION test_refuse_last_use() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'test: last use refused at commit'; END $$"
        )
    )
    db.execute(
        text(
            "CREATE CONSTRAINT TRIGGER test_refuse_last_use AFTER UPDATE OF last_used_at ON api_keys "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_refuse_last_use()"
        )
    )
    db.commit()
    yield
    db.rollback()  # the test may have left its transaction failed
    db.execute(text("DROP TRIGGER IF EXISTS test_refuse_last_use ON api_keys"))
    db.execute(text("DROP FUNCTION IF EXISTS test_refuse_last_use()"))
    db.commit()


def test_a_last_use_is_noted_in_the_cache_only_once_its_transaction_committed(
    client: FlaskClient, db: Session, org: Organization, settings: Settings, last_use_fails_at_commit: None
) -> None:
    """Noted before a commit that fails, the cache would believe the use written and skip writing it for
    a minute."""
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    assert post(client, key).status_code == 503  # its transaction, last use included, failed at commit
    cached = cache.get(hash_key(key))
    assert cached is not None and cached.caller.last_used_at is None
    db.execute(text("DROP TRIGGER test_refuse_last_use ON api_keys"))
    db.commit()
    assert post(client, key).status_code == 201  # so the next request writes it
    stored = db.query(ApiKey).filter(ApiKey.key_hash == hash_key(key)).one()
    assert stored.last_used_at is not None


def test_there_is_no_cache_on_sqlite(sqlite_settings: Settings) -> None:
    assert cache_for(sqlite_settings.database_url) is None


def test_a_key_read_while_its_revocation_commits_is_forgotten_at_commit(
    db: Session, org: Organization, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = listening_key_cache(settings.database_url)
    key = make_key(db, org)
    known = KnownKey(authenticate(db, key), "acme")
    db.rollback()
    # Its NOTIFY on a channel nobody listens to: only the clear at commit can forget the key here.
    monkeypatch.setattr(key_cache, "CHANNEL", "olx_api_keys_unheard")
    assert revoke_api_key(db, org.id, key_id(db, key)) is not None
    # Before the revocation commits, a request of this process looks the key up (still valid to it)
    # and keeps it, after the clear that the revocation made.
    cache.put(hash_key(key), known, cache.generation())
    assert cache.get(hash_key(key)) is not None
    db.commit()
    assert cache.get(hash_key(key)) is None  # cleared by the commit itself, not only by the NOTIFY


def test_the_last_use_is_noted_for_the_requests_own_key_whoever_stores_it(
    app: Any, db: Session, org: Organization, settings: Settings
) -> None:
    """Under group commit, one request stores the others' events and runs their hooks in its own thread
    and request context: each hook notes its own key."""
    from portal.api import views

    cache = listening_key_cache(settings.database_url)
    follower_key, leader_key = make_key(db, org, "follower"), make_key(db, org, "leader")
    for key in (follower_key, leader_key):
        cache.put(hash_key(key), KnownKey(authenticate(db, key), "acme"), cache.generation())
    db.rollback()
    with app.test_request_context(headers={"Authorization": f"Bearer {follower_key}"}):
        known = cache.get(hash_key(follower_key))
        assert known is not None
        hook = views._recording_use(known.caller)
    with app.test_request_context(headers={"Authorization": f"Bearer {leader_key}"}):
        hook.before(db)
        db.commit()
        assert hook.after is not None
        hook.after()
    follower, leader = cache.get(hash_key(follower_key)), cache.get(hash_key(leader_key))
    assert follower is not None and follower.caller.last_used_at is not None
    assert leader is not None and leader.caller.last_used_at is None
