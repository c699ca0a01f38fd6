"""Settings read from the environment, parsed strictly.

Every process (web, worker, scheduler, CLI) builds one :class:`Settings` at start-up. A value that is
present but malformed stops start-up with a message naming the variable, so a typo never turns into a
silently different behaviour in production.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

DEFAULT_DATABASE_URL = "sqlite:///instance/portal.db"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_LOGIN_LIMIT_PER_ACCOUNT = "10 per 15 minutes"
DEFAULT_LOGIN_LIMIT_PER_ADDRESS = "50 per 15 minutes"
DEFAULT_API_KEY_LIMIT_PER_ADDRESS = "30 per minute"
DEFAULT_API_KEY_LIMIT_PER_PREFIX = "10 per minute"
# The ingest API's bounds. An event may not exceed the app-wide request limit (MAX_CONTENT_LENGTH, 5 MiB),
# so its own limit can only be lowered (e.g. to match a consumer's); a batch has its own, larger one.
DEFAULT_LINEAGE_MAX_EVENT_BYTES = 5 * 1024 * 1024
DEFAULT_LINEAGE_BATCH_MAX_EVENTS = 1000
DEFAULT_LINEAGE_BATCH_MAX_BYTES = 16 * 1024 * 1024
# Batches one web worker process decodes, checks and stores at once, whatever its threads: a batch of
# 1,000 events of 12 KiB takes about 50 MB while it is stored (its body 12 MB, its events parsed 34 MB).
DEFAULT_LINEAGE_BATCH_CONCURRENCY = 2

# Every pattern is ASCII-only (\d is [0-9], not any Unicode digit) and anchored with \A...\Z: "$"
# would also match before a trailing newline.
_ACCOUNT_ID = re.compile(r"\A[0-9]{12}\Z", re.ASCII)
_QUEUE_NAME = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z", re.ASCII)
_SMALL_INT = re.compile(r"\A[0-9]{1,3}\Z", re.ASCII)
_WHOLE_NUMBER = re.compile(r"\A[0-9]{1,10}\Z", re.ASCII)
_SECRET_FIELDS = frozenset({"secret_key", "metrics_token"})
_URL_FIELDS = frozenset({"database_url", "redis_url", "aws_endpoint_url"})
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable and what it expects."""


@dataclass(frozen=True)
class Settings:
    """The product's configuration.

    Attributes:
        database_url: SQLAlchemy URL. SQLite file by default; PostgreSQL in production.
        redis_url: Redis for the RQ queues (Redis holds no state the database cannot rebuild).
        secret_key: Flask session and CSRF signing key. Required: there is no safe default.
        vendor_account_id: Our AWS account, the only principal the customer role trusts.
        aws_endpoint_url: Override for every AWS client (a local moto server); None for real AWS.
        aws_region: Region for STS and the first S3 call before the bucket's region is known.
        require_external_id_enforcement: Refuse a customer role that can be assumed without the
            External ID. Only a local AWS emulator, which cannot model trust conditions, turns it off.
        export_queue: Name of the RQ queue that export jobs go to.
        local_mode: The product runs against a local AWS endpoint (demo); enables the local deploy button.
        cfn_template_base_url: HTTPS folder (ending in ``/``) of the public copy of the static role
            template; the deploy step's quick-create link points the AWS console at it. None: no link.
        metrics_token: Bearer token a Prometheus scraper presents to /metrics (optional).
        login_limit_per_account: Failed sign-ins allowed per account (and per device cookie) before
            a temporary lockout, as a flask-limiter rate ("10 per 15 minutes").
        login_limit_per_address: Failed sign-ins allowed per client address.
        api_key_limit_per_address: Requests with a bad API key allowed per client address.
        api_key_limit_per_prefix: Bad keys allowed per key prefix (the real key is never refused).
        proxy_hops: How many proxies (load balancers) in front of the portal append to
            X-Forwarded-For; 0 trusts no such header and uses the connection's address.
        lineage_max_event_bytes: The largest body of ``POST /api/v1/lineage`` (before and after gzip).
        lineage_batch_max_events: The most events of one ``POST /api/v1/lineage/batch``.
        lineage_batch_max_bytes: The largest body of one batch (before and after gzip).
    """

    database_url: str
    redis_url: str
    secret_key: str
    vendor_account_id: str
    aws_endpoint_url: str | None
    aws_region: str
    require_external_id_enforcement: bool
    export_queue: str
    local_mode: bool
    cfn_template_base_url: str | None = None
    metrics_token: str | None = None
    login_limit_per_account: str = DEFAULT_LOGIN_LIMIT_PER_ACCOUNT
    login_limit_per_address: str = DEFAULT_LOGIN_LIMIT_PER_ADDRESS
    api_key_limit_per_address: str = DEFAULT_API_KEY_LIMIT_PER_ADDRESS
    api_key_limit_per_prefix: str = DEFAULT_API_KEY_LIMIT_PER_PREFIX
    proxy_hops: int = 0
    lineage_max_event_bytes: int = DEFAULT_LINEAGE_MAX_EVENT_BYTES
    lineage_batch_max_events: int = DEFAULT_LINEAGE_BATCH_MAX_EVENTS
    lineage_batch_max_bytes: int = DEFAULT_LINEAGE_BATCH_MAX_BYTES
    lineage_batch_concurrency: int = DEFAULT_LINEAGE_BATCH_CONCURRENCY

    def __repr__(self) -> str:
        # Settings end up in tracebacks, debuggers and error reports (any of which may print locals):
        # the signing key and the metrics token never appear, and URLs lose their passwords.
        fields = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _SECRET_FIELDS:
                shown = "'***'" if value else repr(value)
            elif field.name in _URL_FIELDS:
                shown = repr(_redact(value))
            else:
                shown = repr(value)
            fields.append(f"{field.name}={shown}")
        return f"Settings({', '.join(fields)})"

    __str__ = __repr__

    @property
    def schedule_queue(self) -> str:
        """The queue of the schedule's periodic jobs (the tick), separate so exports never delay it long."""
        return f"{self.export_queue}-schedule"

    @property
    def derive_queue(self) -> str:
        """The queue of lineage derivation jobs (column lineage from SQL), taken before exports."""
        return f"{self.export_queue}-derive"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from environment variables.

        Raises:
            ConfigError: a required variable is missing or a value is malformed.
        """
        env = os.environ if env is None else env
        secret_key = env.get("SECRET_KEY", "")
        if len(secret_key) < 16:
            raise ConfigError(
                "SECRET_KEY must be set to a random string of at least 16 characters "
                "(for example: python -c 'import secrets; print(secrets.token_hex(32))')."
            )
        vendor_account_id = env.get("VENDOR_AWS_ACCOUNT_ID", "")
        if not _ACCOUNT_ID.match(vendor_account_id):
            raise ConfigError(
                "VENDOR_AWS_ACCOUNT_ID must be the 12-digit AWS account ID that customer roles trust; "
                f"got {vendor_account_id!r}."
            )
        endpoint = env.get("AWS_ENDPOINT_URL") or None
        if endpoint is not None:
            parsed = urlparse(endpoint)
            if parsed.scheme not in {"http", "https"} or not parsed.netloc:
                raise ConfigError(f"AWS_ENDPOINT_URL must be an http(s) URL; got {endpoint!r}.")
        database_url = env.get("DATABASE_URL", DEFAULT_DATABASE_URL)
        if not database_url.startswith(("sqlite:", "postgresql:", "postgresql+psycopg:")):
            raise ConfigError(
                f"DATABASE_URL must be a sqlite:// or postgresql:// URL; got {_redact(database_url)!r}."
            )
        redis_url = env.get("REDIS_URL", DEFAULT_REDIS_URL)
        if urlparse(redis_url).scheme not in {"redis", "rediss", "unix"}:
            raise ConfigError(f"REDIS_URL must be a redis:// URL; got {_redact(redis_url)!r}.")
        queue = env.get("EXPORT_QUEUE", "exports")
        if not _QUEUE_NAME.match(queue):
            raise ConfigError(f"EXPORT_QUEUE may contain only letters, digits, '_' and '-'; got {queue!r}.")
        return cls(
            database_url=_normalise_postgres_url(database_url),
            redis_url=redis_url,
            secret_key=secret_key,
            vendor_account_id=vendor_account_id,
            aws_endpoint_url=endpoint,
            aws_region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            require_external_id_enforcement=_flag(env, "REQUIRE_EXTERNAL_ID_ENFORCEMENT", default=True),
            export_queue=queue,
            local_mode=_flag(env, "LOCAL_MODE", default=False),
            cfn_template_base_url=_https_folder(env, "CFN_TEMPLATE_BASE_URL"),
            metrics_token=_optional_secret(env, "METRICS_TOKEN"),
            login_limit_per_account=_rate(env, "LOGIN_LIMIT_PER_ACCOUNT", DEFAULT_LOGIN_LIMIT_PER_ACCOUNT),
            login_limit_per_address=_rate(env, "LOGIN_LIMIT_PER_ADDRESS", DEFAULT_LOGIN_LIMIT_PER_ADDRESS),
            api_key_limit_per_address=_rate(
                env, "API_KEY_LIMIT_PER_ADDRESS", DEFAULT_API_KEY_LIMIT_PER_ADDRESS
            ),
            api_key_limit_per_prefix=_rate(env, "API_KEY_LIMIT_PER_PREFIX", DEFAULT_API_KEY_LIMIT_PER_PREFIX),
            proxy_hops=_small_int(env, "PROXY_HOPS", default=0, maximum=5),
            lineage_max_event_bytes=_bounded_int(
                env,
                "LINEAGE_MAX_EVENT_BYTES",
                DEFAULT_LINEAGE_MAX_EVENT_BYTES,
                1024,
                DEFAULT_LINEAGE_MAX_EVENT_BYTES,
            ),
            lineage_batch_max_events=_bounded_int(
                env, "LINEAGE_BATCH_MAX_EVENTS", DEFAULT_LINEAGE_BATCH_MAX_EVENTS, 1, 10_000
            ),
            lineage_batch_max_bytes=_bounded_int(
                env, "LINEAGE_BATCH_MAX_BYTES", DEFAULT_LINEAGE_BATCH_MAX_BYTES, 1024, 256 * 1024 * 1024
            ),
            lineage_batch_concurrency=_bounded_int(
                env, "LINEAGE_BATCH_CONCURRENCY", DEFAULT_LINEAGE_BATCH_CONCURRENCY, 1, 64
            ),
        )


def _flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false; got {raw!r}.")


def _rate(env: Mapping[str, str], name: str, default: str) -> str:
    """A rate such as "10 per 15 minutes" (flask-limiter's notation), checked at start-up."""
    value = (env.get(name) or default).strip()
    try:
        from limits import parse_many

        items = parse_many(value)
    except ValueError:
        items = []
    if len(items) != 1:
        raise ConfigError(f"{name} must be one rate such as '10 per 15 minutes'; got {value!r}.")
    return value


def _small_int(env: Mapping[str, str], name: str, *, default: int, maximum: int) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not _SMALL_INT.match(raw) or int(raw) > maximum:
        raise ConfigError(f"{name} must be a whole number from 0 to {maximum}; got {raw!r}.")
    return int(raw)


def _bounded_int(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not _WHOLE_NUMBER.match(raw) or not minimum <= int(raw) <= maximum:
        raise ConfigError(f"{name} must be a whole number from {minimum} to {maximum}; got {raw!r}.")
    return int(raw)


def _optional_secret(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name) or None
    if value is not None and len(value) < 16:
        raise ConfigError(f"{name} must be at least 16 characters when set.")
    return value


def _normalise_postgres_url(url: str) -> str:
    # psycopg 3 is the driver we ship; a plain postgresql:// URL would make SQLAlchemy look for psycopg2.
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def _https_folder(env: Mapping[str, str], name: str) -> str | None:
    """An optional https:// URL of a folder (no query or fragment), returned ending in ``/``."""
    value = (env.get(name) or "").strip()
    if not value:
        return None
    parsed = urlparse(value)
    if (
        parsed.scheme != "https"
        or not parsed.netloc
        or "@" in parsed.netloc
        or parsed.query
        or parsed.fragment
    ):
        raise ConfigError(
            f"{name} must be an https:// URL of a folder (https://<bucket>.s3.<region>.amazonaws.com/"
            f"<prefix>/); got {value!r}."
        )
    return value if value.endswith("/") else value + "/"


def _redact(url: str | None) -> str | None:
    """The URL without its password (and without a token-like user name alone), for messages and repr."""
    if not url:
        return url
    try:
        parsed = urlparse(url)
        password = parsed.password
    except ValueError:
        return "***"
    if password:
        netloc = parsed.netloc.rpartition("@")
        user = netloc[0].partition(":")[0]
        return parsed._replace(netloc=f"{user}:***@{netloc[2]}").geturl()
    return url
