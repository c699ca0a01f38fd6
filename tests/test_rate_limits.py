"""Brute-force limits, against the suite's real Redis (finding 1 of the abuse review).

Each test builds an app with low limits of its own; the ``settings`` fixture empties this run's Redis
DB afterwards, so counts never leak between tests.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import hash_key, revoke_api_key
from lineage_core.infra.config import Settings
from lineage_core.infra.models import ApiKey, Organization, Role, User
from portal import create_app
from portal.limits import DEVICE_COOKIE, KEY_PREFIX
from tests.factories import make_key, make_user, run_event
from tests.key_cache import listening_key_cache
from tests.web import PASSWORD, csrf_token_from, login

LOW = {
    "LOGIN_LIMIT_PER_ACCOUNT": "3 per minute",
    "LOGIN_LIMIT_PER_ADDRESS": "6 per minute",
    "API_KEY_LIMIT_PER_ADDRESS": "4 per minute",
    "API_KEY_LIMIT_PER_PREFIX": "3 per minute",
}


def _app(settings: Settings, **config: Any) -> Flask:
    return create_app(test_config={"TESTING": True, **LOW, **config}, settings=settings)


def _try(client: FlaskClient, email: str, password: str, address: str = "203.0.113.7", **headers: str) -> Any:
    page = client.get("/login", environ_base={"REMOTE_ADDR": address}, headers=headers).get_data(as_text=True)
    return client.post(
        "/login",
        data={"email": email, "password": password, "csrf_token": csrf_token_from(page)},
        environ_base={"REMOTE_ADDR": address},
        headers=headers,
    )


def _retry_after(response: Any, window: int = 60) -> int:
    value = int(response.headers["Retry-After"])
    assert 0 < value <= window
    return value


def test_wrong_passwords_lock_the_account_with_retry_after(settings: Settings, admin: User) -> None:
    client = _app(settings).test_client()
    for _ in range(3):
        assert _try(client, admin.email, "wrong password!!").status_code == 200
    locked = _try(client, admin.email, PASSWORD)  # even the right password: the account is paused
    assert locked.status_code == 429
    _retry_after(locked)
    assert "Try again in 1 minute" in locked.get_data(as_text=True)
    assert client.get("/integrations/").status_code == 302
    # The limiter's counts live in the run's Redis DB.
    keys = redis.Redis.from_url(settings.redis_url).keys(f"{KEY_PREFIX}*")
    assert keys


def test_unknown_accounts_are_limited_the_same_way(settings: Settings) -> None:
    client = _app(settings).test_client()
    answers = [_try(client, "nobody@nowhere.test", "wrong password!!").status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]


def test_successful_sign_ins_do_not_count(settings: Settings, admin: User) -> None:
    client = _app(settings).test_client()
    for _ in range(6):
        assert _try(client, admin.email, PASSWORD).status_code == 302


def test_the_owners_browser_still_signs_in_while_an_attacker_locked_the_account(
    settings: Settings, admin: User
) -> None:
    app = _app(settings)
    owner = app.test_client()
    assert _try(owner, admin.email, PASSWORD, address="198.51.100.1").status_code == 302
    device = owner.get_cookie(DEVICE_COOKIE, path="/login")
    assert device is not None
    later = app.test_client()  # the owner's browser on another day: only the device cookie is left
    later.set_cookie(DEVICE_COOKIE, device.value, path="/login")

    attacker = app.test_client()
    for _ in range(3):
        _try(attacker, admin.email, "guess guess guess")
    assert _try(attacker, admin.email, PASSWORD).status_code == 429
    # The device cookie of an earlier sign-in has a budget of its own.
    assert _try(later, admin.email, PASSWORD, address="198.51.100.1").status_code == 302


def test_a_forged_device_cookie_does_not_lift_the_lock(settings: Settings, admin: User) -> None:
    client = _app(settings).test_client()
    client.set_cookie(DEVICE_COOKIE, "not-a-signed-cookie", path="/login")
    for _ in range(3):
        _try(client, admin.email, "wrong password!!")
    assert _try(client, admin.email, PASSWORD).status_code == 429


def test_the_lockout_ends_by_itself(settings: Settings, admin: User) -> None:
    client = _app(settings, LOGIN_LIMIT_PER_ACCOUNT="2 per 2 seconds").test_client()
    for _ in range(2):
        _try(client, admin.email, "wrong password!!")
    assert _try(client, admin.email, PASSWORD).status_code == 429
    time.sleep(2.2)
    assert _try(client, admin.email, PASSWORD).status_code == 302


def test_one_address_trying_many_accounts_is_limited(settings: Settings) -> None:
    client = _app(settings).test_client()
    answers = [_try(client, f"user{i}@acme.test", "wrong password!!").status_code for i in range(7)]
    assert answers == [200] * 6 + [429]
    # Another address is not affected.
    assert _try(client, "user0@acme.test", "wrong password!!", address="192.0.2.9").status_code == 200


# API keys ---------------------------------------------------------------------------------------------

URL = "/api/v1/lineage"


def _ingest(client: FlaskClient, key: str, address: str = "203.0.113.50") -> Any:
    return client.post(
        URL,
        data=orjson.dumps(run_event()),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        environ_base={"REMOTE_ADDR": address},
    )


def test_bad_api_keys_from_one_address_get_429_with_retry_after(
    settings: Settings, db: Session, org: Organization
) -> None:
    client = _app(settings).test_client()
    answers = [_ingest(client, f"olk_{i:08x}_" + "x" * 43).status_code for i in range(5)]
    assert answers == [401] * 4 + [429]
    refused = _ingest(client, "garbage")
    assert refused.status_code == 429 and refused.get_json()["error"] == "rate_limited"
    _retry_after(refused)
    # Before any lookup: even a valid key from that address waits.
    assert _ingest(client, make_key(db, org)).status_code == 429
    assert _ingest(client, make_key(db, org), address="192.0.2.10").status_code == 201


def test_a_key_the_worker_knows_to_be_valid_still_works_from_an_address_over_the_limit(
    settings: Settings, db: Session, org: Organization
) -> None:
    listening_key_cache(settings.database_url)
    client = _app(settings).test_client()
    producer = make_key(db, org)
    assert _ingest(client, producer).status_code == 201  # now known to this worker
    # Another client behind the same address (a NAT, a shared proxy) sprays bad keys.
    answers = [_ingest(client, f"olk_{i:08x}_" + "x" * 43).status_code for i in range(5)]
    assert answers == [401] * 4 + [429]
    assert _ingest(client, producer).status_code == 201  # guesses nothing: not limited
    assert _ingest(client, make_key(db, org)).status_code == 429  # unknown here: limited
    # Revoked, it is unknown again: limited before any lookup.
    key = db.query(ApiKey).filter(ApiKey.key_hash == hash_key(producer)).one()
    assert revoke_api_key(db, org.id, key.id) is not None
    db.commit()
    assert _ingest(client, producer).status_code == 429


def test_a_known_key_lifts_no_limit_of_any_other_view(
    settings: Settings, db: Session, org: Organization
) -> None:
    """The known-key exemption is the API-key views' only: a valid API key sent along to the sign-in page
    does not lift its limits."""
    client = _app(settings).test_client()
    producer = make_key(db, org)
    cache = listening_key_cache(settings.database_url)
    assert _ingest(client, producer, address="203.0.113.7").status_code == 201
    assert cache.knows(hash_key(producer))  # known to this worker: the exemption would apply
    bearer = f"Bearer {producer}"
    answers = [
        _try(client, f"user{i}@acme.test", "wrong password!!", Authorization=bearer).status_code
        for i in range(7)
    ]
    assert answers == [200] * 6 + [429]


def test_bad_keys_with_a_real_prefix_are_limited_but_the_real_key_still_works(
    settings: Settings, db: Session, org: Organization
) -> None:
    client = _app(settings).test_client()
    real = make_key(db, org)
    forged = real[:13] + "A" * 43
    # From many addresses, so that only the prefix limit applies.
    answers = [_ingest(client, forged, address=f"192.0.2.{i}").status_code for i in range(4)]
    assert answers == [401, 401, 401, 429]
    assert _ingest(client, real, address="192.0.2.200").status_code == 201


def test_limits_are_counted_in_metrics(settings: Settings, db: Session, admin: User) -> None:
    app = _app(settings)
    client = app.test_client()
    for _ in range(4):
        _try(client, admin.email, "wrong password!!")
    for i in range(5):
        _ingest(client, f"olk_{i:08x}_" + "x" * 43)
    make_user(db, None, "ops@vendor.test", Role.OPERATOR)
    ops = app.test_client()
    login(ops, "ops@vendor.test")
    text = ops.get("/metrics").get_data(as_text=True)
    assert 'olx_rate_limited_total{limit="login_account"} 1.0' in text
    assert 'olx_rate_limited_total{limit="api_key_address"} 1.0' in text
    assert 'olx_auth_failures_total{kind="login"} 3.0' in text
    assert 'olx_auth_failures_total{kind="api_key"} 4.0' in text


@pytest.mark.parametrize("name", ["LOGIN_LIMIT_PER_ACCOUNT", "API_KEY_LIMIT_PER_PREFIX"])
def test_limits_are_settings_checked_at_start(name: str) -> None:
    from lineage_core.infra.config import ConfigError

    env = {"SECRET_KEY": "s" * 32, "VENDOR_AWS_ACCOUNT_ID": "123456789012"}
    assert Settings.from_env({**env, name: "5 per 10 minutes"})
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({**env, name: "lots"})


def test_behind_a_load_balancer_the_forwarded_address_is_the_one_limited(
    settings: Settings, admin: User
) -> None:
    from dataclasses import replace

    app = create_app(test_config={"TESTING": True, **LOW}, settings=replace(settings, proxy_hops=1))
    client = app.test_client()

    def attempt(forwarded: str) -> int:
        page = client.get("/login").get_data(as_text=True)
        return client.post(
            "/login",
            data={"email": f"{forwarded}@x.test", "password": "wrong!", "csrf_token": csrf_token_from(page)},
            headers={"X-Forwarded-For": forwarded},
        ).status_code

    assert [attempt("203.0.113.1") for _ in range(7)][-1] == 429
    assert attempt("203.0.113.2") == 200
