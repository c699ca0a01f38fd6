"""Brute-force limits on sign-in and on API keys, counted in Redis by flask-limiter.

Only *failures* count (flask-limiter's ``deduct_when``): a limit is tested before the view runs and
charged after it, when the request failed. Over a limit, the request is answered 429 with
``Retry-After`` before any password hash or key lookup is computed.

Sign-in (``POST /login``):

* per account (the typed e-mail, lowercased, known or not, so that the answer tells nothing about
  which accounts exist): ``LOGIN_LIMIT_PER_ACCOUNT`` failures, 10 per 15 minutes by default. This is the
  temporary lockout. It cannot keep a real user out for long: it ends by itself when the window moves
  on, and it does not apply to a browser holding the account's *device cookie* (set by a successful
  sign-in, signed, kept 180 days), which has a budget of its own. So an attacker who fails on purpose
  locks out only the browsers that never signed in to that account (OWASP's "device cookie" scheme).
* per client address: ``LOGIN_LIMIT_PER_ADDRESS`` failures, 50 per 15 minutes: one address trying
  many accounts.

Ingest API (``POST /api/v1/lineage``), for answers 401 (missing, malformed, unknown or revoked key):

* per client address: ``API_KEY_LIMIT_PER_ADDRESS``, 30 failures a minute; checked before the key is
  looked up, so an address guessing keys costs the database nothing once it is over. Not checked for
  a key the web worker knows to be valid (it authenticated there within the minute and was not
  revoked since: :mod:`lineage_core.accounts.key_cache`): a producer sharing its address with a
  sprayer of bad keys keeps working, as with the prefix limit below.
* per key prefix (the ``olk_xxxxxxxx`` part, which admins see and which may be known): ``API_KEY_LIMIT_
  PER_PREFIX``, 10 failures a minute. Over it, *wrong* keys with that prefix get 429; the real key still
  authenticates, so nobody can switch a producer off by spraying its prefix.

The client address is the connection's, or with ``PROXY_HOPS`` set the one the load balancers in
front of us appended to ``X-Forwarded-For`` (``werkzeug.middleware.proxy_fix``). Breaches and failures
are counted in Redis for ``/metrics`` (:class:`AbuseCollector`). If Redis does not answer, limits fall
back to each process's memory rather than failing requests.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from flask import Flask, Response, current_app, g, jsonify, render_template, request
from flask_limiter import Limiter, RequestLimit
from itsdangerous import BadSignature, URLSafeTimedSerializer
from limits import parse
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from redis import Redis
from redis.exceptions import RedisError
from werkzeug.wrappers.response import Response as BaseResponse

from lineage_core.accounts.api_keys import bearer_credential, hash_key
from lineage_core.accounts.key_cache import cache_for

log = logging.getLogger(__name__)

DEVICE_COOKIE = "olx_device"
DEVICE_COOKIE_DAYS = 180
_DEVICE_SALT = "portal.device-cookie"
KEY_PREFIX = "olx-limits"
COUNTERS_KEY = "olx-limits:counters"
LIMIT_NAMES = ("login_account", "login_device", "login_address", "api_key_address", "api_key_prefix")
FAILURE_NAMES = ("login", "api_key")


def client_address() -> str:
    return request.remote_addr or "unknown"


def _config(name: str) -> Callable[[], str]:
    def value() -> str:
        return str(current_app.config[name])

    return value


limiter = Limiter(
    key_func=client_address,
    key_prefix=KEY_PREFIX,
    strategy="moving-window",
    headers_enabled=False,  # Retry-After is set on the 429 only (see _too_many)
    swallow_errors=True,
    in_memory_fallback_enabled=True,
)


# Sign-in ------------------------------------------------------------------------------------------------


def typed_email() -> str:
    return (request.form.get("email") or "").strip().lower()[:320]


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=_DEVICE_SALT)


def device_nonce() -> str | None:
    """The nonce of this browser's device cookie, when the cookie is ours and for the typed account."""
    if "device_nonce" in g:
        return g.device_nonce  # type: ignore[no-any-return]
    g.device_nonce = None
    raw = request.cookies.get(DEVICE_COOKIE)
    email = typed_email()
    if raw and email:
        try:
            data = _serializer().loads(raw, max_age=DEVICE_COOKIE_DAYS * 86400)
        except BadSignature:
            data = None
        if isinstance(data, dict) and data.get("e") == email and isinstance(data.get("n"), str):
            g.device_nonce = data["n"]
    return g.device_nonce  # type: ignore[no-any-return]


def set_device_cookie(response: BaseResponse, email: str) -> None:
    """After a successful sign-in: this browser is one the account's owner uses."""
    value = _serializer().dumps({"e": email.strip().lower(), "n": secrets.token_urlsafe(16)})
    response.set_cookie(
        DEVICE_COOKIE,
        value,
        max_age=DEVICE_COOKIE_DAYS * 86400,
        httponly=True,
        secure=bool(current_app.config.get("SESSION_COOKIE_SECURE")),
        samesite="Lax",
        path="/login",
    )


def login_failed(_response: Response) -> bool:
    return bool(g.get("login_failed"))


def mark_login_failed() -> None:
    g.login_failed = True
    count_failure("login")


def _is_get() -> bool:
    return request.method != "POST"


def login_limits(view: Callable[..., Any]) -> Callable[..., Any]:
    """The three sign-in limits, on the login view."""
    view = limiter.limit(
        _config("LOGIN_LIMIT_PER_ADDRESS"),
        key_func=client_address,
        scope="login-address",
        exempt_when=_is_get,
        deduct_when=login_failed,
        on_breach=_breach("login_address"),
    )(view)
    view = limiter.limit(
        _config("LOGIN_LIMIT_PER_ACCOUNT"),
        key_func=lambda: f"device:{device_nonce()}",
        scope="login-device",
        exempt_when=lambda: _is_get() or device_nonce() is None,
        deduct_when=login_failed,
        on_breach=_breach("login_device"),
    )(view)
    return limiter.limit(
        _config("LOGIN_LIMIT_PER_ACCOUNT"),
        key_func=lambda: f"account:{typed_email() or '-'}",
        scope="login-account",
        exempt_when=lambda: _is_get() or device_nonce() is not None,
        deduct_when=login_failed,
        on_breach=_breach("login_account"),
    )(view)


# API keys -----------------------------------------------------------------------------------------------


def api_key_failed(response: Response) -> bool:
    return response.status_code == 401


def api_key_address_limit(view: Callable[..., Any]) -> Callable[..., Any]:
    """The per-address limit of bad API keys, on the API-key views (ingest, connections): tested before
    the view runs, except for a key this process knows to be valid (see :func:`_known_key_request`).

    Such a request is exempted from every limit of the request, so a view under this limit carries no
    other limit (nor does a view that wraps it: ``functools.wraps`` copies the mark)."""
    limited = limiter.limit(
        _config("API_KEY_LIMIT_PER_ADDRESS"),
        key_func=client_address,
        scope="api-key-address",
        deduct_when=api_key_failed,
        on_breach=_breach("api_key_address"),
    )(view)
    limited._known_keys_exempt = True  # type: ignore[attr-defined]  # read by _known_key_request
    return limited


_KNOWN_KEY_REQUEST = "olx.known_key_request"


@limiter.request_filter
def _known_key_request() -> bool:
    """A request to a view under :func:`api_key_address_limit` whose key authenticated here a moment ago
    (the API key cache, which forgets a revoked key as soon as the revocation's notification arrives).

    Such a request guesses nothing, so the address limit does not apply to it: a producer keeps working
    while another client behind the same address sprays bad keys. As a request filter, which
    flask-limiter consults before anything else (in its before-request hook and again in the view's
    decorator), it also skips the limiter's whole evaluation (about 0.3 ms of a single event's 4.9,
    measured through the test client). Any other view keeps its limits, whatever key the request
    carries."""
    # Asked twice per request: answered once, kept in the request's own environ (``g`` can outlive a
    # request: one pushed inside an app context already active shares that context's ``g``).
    environ = request.environ
    known = environ.get(_KNOWN_KEY_REQUEST)
    if known is None:
        view = current_app.view_functions.get(request.endpoint or "")
        known = environ[_KNOWN_KEY_REQUEST] = (
            bool(getattr(view, "_known_keys_exempt", False)) and _known_good_key()
        )
    return bool(known)


def _known_good_key() -> bool:
    """The request's Bearer key is one this process's key cache knows to be valid."""
    cache = cache_for(current_app.config["SETTINGS"].database_url)
    if cache is None:
        return False
    credential = bearer_credential(request.headers.get("Authorization"))
    return bool(credential) and cache.knows(hash_key(credential))


def bad_key_refused_for_prefix(prefix: str) -> Response | None:
    """Charge one bad key to its prefix; the 429 to answer instead of the 401 once over the limit.

    Called only after a key failed to authenticate, so the real key of a prefix is never refused.
    """
    if not limiter.enabled:
        return None
    item = parse(current_app.config["API_KEY_LIMIT_PER_PREFIX"])
    keys = (KEY_PREFIX, "api-key-prefix", prefix)
    try:
        if limiter.limiter.hit(item, *keys):
            return None
        reset_at = limiter.limiter.get_window_stats(item, *keys).reset_time
    except (RedisError, OSError):
        log.warning("rate limit storage unreachable: the prefix limit is not applied")
        return None
    count_breach("api_key_prefix")
    retry_after = max(1, math.ceil(reset_at - time.time()))
    log.warning(
        "rate limit api_key_prefix reached; refused for %d s", retry_after, extra={"limit": "api_key_prefix"}
    )
    return _too_many("api_key_prefix", retry_after)


# Over a limit -------------------------------------------------------------------------------------------


def _breach(name: str) -> Callable[[RequestLimit], Response]:
    def on_breach(request_limit: RequestLimit) -> Response:
        count_breach(name)
        retry_after = max(1, math.ceil(request_limit.window.reset_time - time.time()))
        log.warning("rate limit %s reached; refused for %d s", name, retry_after, extra={"limit": name})
        return _too_many(name, retry_after)

    return on_breach


def _too_many(name: str, retry_after: int) -> Response:
    minutes = max(1, math.ceil(retry_after / 60))
    if name.startswith("api_key"):
        message = (
            f"Too many requests with a wrong API key; try again in {retry_after} seconds with a valid key."
        )
        response = jsonify(
            error="rate_limited",
            message=message,
            field="Authorization",
            problems=[{"field": "Authorization", "code": "rate_limited", "message": message}],
        )
    else:
        response = Response(
            render_template("auth/limited.html", minutes=minutes, per_account=name != "login_address")
        )
    response.status_code = 429
    response.headers["Retry-After"] = str(retry_after)
    return response


# Counters for /metrics ----------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _redis(url: str) -> Redis:
    # One connection pool per process and URL: counting must not open a connection per request.
    return Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)


def _count(field: str) -> None:
    from portal.database import settings

    try:
        _redis(settings().redis_url).hincrby(COUNTERS_KEY, field, 1)
    except RedisError:
        log.warning("could not count %s in Redis", field)


def count_breach(name: str) -> None:
    _count(f"breach:{name}")


def count_failure(kind: str) -> None:
    _count(f"failure:{kind}")


class AbuseCollector(Collector):
    """``olx_rate_limited_total{limit}`` and ``olx_auth_failures_total{kind}``, from Redis."""

    def __init__(self, redis_url: str) -> None:
        self._redis_url = redis_url

    def collect(self) -> Iterator[Metric]:
        try:
            raw: dict[bytes, bytes] = _redis(self._redis_url).hgetall(COUNTERS_KEY)  # type: ignore[assignment]
        except RedisError:
            raw = {}
        counts = {key.decode(): int(value) for key, value in raw.items()}
        limited = CounterMetricFamily(
            "olx_rate_limited", "Requests refused with 429 by a brute-force limit.", labels=["limit"]
        )
        for name in LIMIT_NAMES:
            limited.add_metric([name], counts.get(f"breach:{name}", 0))
        yield limited
        failures = CounterMetricFamily(
            "olx_auth_failures", "Failed sign-ins and requests with a bad API key.", labels=["kind"]
        )
        for kind in FAILURE_NAMES:
            failures.add_metric([kind], counts.get(f"failure:{kind}", 0))
        yield failures


def init_app(app: Flask) -> None:
    app.config.setdefault("RATELIMIT_STORAGE_URI", app.config["SETTINGS"].redis_url)
    app.config.setdefault("RATELIMIT_STORAGE_OPTIONS", {"socket_connect_timeout": 2, "socket_timeout": 2})
    limiter.init_app(app)
