"""Real services for the tests: a throwaway PostgreSQL database, a private Redis DB, a moto server.

Several test runs may share this machine (CI, a developer's run, a benchmark), so each run creates its
own PostgreSQL database and claims a Redis DB index of its own instead of using fixed names.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import redis

PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_HOST = os.environ.get("TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
_REDIS_CLAIM_KEY = "openlineage-export:test-run-claim"


@contextmanager
def throwaway_postgres_database() -> Iterator[str]:
    """A new, empty database for this test run; dropped afterwards. Yields its SQLAlchemy URL."""
    name = f"olx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def private_redis_db() -> Iterator[str]:
    """Claims a Redis DB index (1-15) no other test run holds, empties it, and yields its URL."""
    token = uuid.uuid4().hex
    for index in range(1, 16):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=index)
        if client.set(_REDIS_CLAIM_KEY, token, nx=True, ex=3 * 3600):
            break
        client.close()
    else:
        raise RuntimeError("every Redis DB index 1-15 is claimed by another test run")
    for key in client.scan_iter(count=1000):
        if key != _REDIS_CLAIM_KEY.encode():
            client.delete(key)
    try:
        yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{index}"
    finally:
        client.flushdb()
        client.close()


def flush_redis_except_claim(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        token = client.get(_REDIS_CLAIM_KEY)
        client.flushdb()
        if token is not None:
            client.set(_REDIS_CLAIM_KEY, token, ex=3 * 3600)
    finally:
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_env(settings: Any) -> dict[str, str]:
    """The environment a product process (worker, scheduler, CLI) needs to use these settings."""
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": settings.database_url,
            "REDIS_URL": settings.redis_url,
            "SECRET_KEY": settings.secret_key,
            "VENDOR_AWS_ACCOUNT_ID": settings.vendor_account_id,
            "AWS_REGION": settings.aws_region,
            "EXPORT_QUEUE": settings.export_queue,
            "REQUIRE_EXTERNAL_ID_ENFORCEMENT": "true"
            if settings.require_external_id_enforcement
            else "false",
        }
    )
    if settings.aws_endpoint_url:
        env["AWS_ENDPOINT_URL"] = settings.aws_endpoint_url
    return env


def running_worker(settings: Any) -> Any:
    """A real ``python -m worker`` process (see :func:`running_process`)."""
    return running_process(settings, "worker")


@contextmanager
def running_process(settings: Any, module: str, log: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``python -m <module>`` product process for the given settings; SIGTERM afterwards.

    Its output goes to ``log`` when given (read it to explain a failure), else it is discarded.
    """
    with log.open("wb") if log else open(os.devnull, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", module], env=process_env(settings), stdout=output, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
