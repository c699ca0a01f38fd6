"""Real services for the tests: a throwaway PostgreSQL database, a private Redis DB, moto, product processes.

Several test runs may share this machine (CI, a developer's run, a benchmark), so each run creates its
own PostgreSQL database and claims a Redis DB index of its own instead of using fixed names.

Also here: S3 clients on the moto server, a moto front that can hold a request, S3 failures injected
into one client, free ports, and the product's own processes (worker, scheduler) for given settings.
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
from urllib.parse import parse_qs, urlsplit

import boto3
import psycopg
import redis
from botocore.awsrequest import AWSResponse
from sqlalchemy import inspect, text

from lineage_core.infra.db import Base, get_engine
from tests.processes import family_env, kill_family

PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_HOST = os.environ.get("TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
_REDIS_CLAIM_KEY = "openlineage-export:test-run-claim"
VENDOR_ACCOUNT_ID = "123456789012"  # moto's default account: our side of the trust in the test settings


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


def empty_all_tables(database_url: str) -> None:
    """Empty every table the migrations made (not ``alembic_version``), on PostgreSQL or SQLite."""
    engine = get_engine(database_url)
    existing = set(inspect(engine).get_table_names()) - {"alembic_version"}
    tables = [table for table in Base.metadata.sorted_tables if table.name in existing]
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            names = ", ".join(f'"{table.name}"' for table in tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in reversed(tables):
                conn.execute(table.delete())


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


# S3 on the moto server ---------------------------------------------------------------------------------


def s3_client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def pending_uploads(s3: Any, bucket: str) -> list[dict[str, Any]]:
    """The multipart uploads S3 still holds for the bucket (started, neither completed nor aborted)."""
    return list(s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


class _RawBody:
    """The one method botocore reads a response body through."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self._data


def fail_upload_part(
    s3: Any,
    part_number: int,
    *,
    code: str = "AccessDenied",
    message: str = "Access Denied",
    status: int = 403,
) -> list[int]:
    """Make ``s3``'s UploadPart of part ``part_number`` receive S3's error response instead of moto's.

    moto cannot be told to fail one particular request, so the failing response is injected at
    ``before-send``: every other request (CreateMultipartUpload, the other parts, AbortMultipartUpload,
    ListMultipartUploads) still goes to the moto server, and botocore parses the injected response
    exactly as it would parse S3's (same XML error shape, same retry rules; 403 is not retried).

    Returns a list that records the part numbers sent through this client, in order.
    """
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>"
    ).encode()
    sent: list[int] = []

    def before_send(request: Any, **_kwargs: Any) -> AWSResponse | None:
        number = int(parse_qs(urlsplit(request.url).query)["partNumber"][0])
        sent.append(number)
        if number == part_number:
            return AWSResponse(request.url, status, {"Content-Type": "application/xml"}, _RawBody(body))
        return None

    s3.meta.events.register("before-send.s3.UploadPart", before_send)
    return sent


class GatedMotoServer:
    """A second HTTP front on this process's moto backends that holds the requests ``hold`` selects.

    moto keeps its state in module globals, so this server and the suite's moto server share every
    bucket and upload. A held request waits until :meth:`open` (or ``close``): the process that sent it
    is then known to be in the middle of that request, which makes "kill the worker mid-upload" a
    deterministic state instead of a race against the clock.
    """

    def __init__(self, hold: Any) -> None:
        import threading

        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        self.reached = threading.Event()
        self._open = threading.Event()
        backend = DomainDispatcherApplication(create_backend_app)

        def gated(environ: dict[str, Any], start_response: Any) -> Any:
            if hold(environ):
                self.reached.set()
                self._open.wait(timeout=300)
            return backend(environ, start_response)

        port = free_port()
        self._server = make_server(
            "127.0.0.1", port, gated, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{port}"

    def open(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.open()
        self._server.shutdown()
        self._thread.join(timeout=30)


def is_upload_part(number: int) -> Any:
    """A ``hold`` predicate for :class:`GatedMotoServer`: the UploadPart request of part ``number``."""

    def hold(environ: dict[str, Any]) -> bool:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        return environ["REQUEST_METHOD"] == "PUT" and query.get("partNumber") == [str(number)]

    return hold


# Product processes ------------------------------------------------------------------------------------


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
    env, family = family_env(process_env(settings))
    with log.open("wb") if log else open(os.devnull, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", module], env=env, stdout=output, stderr=subprocess.STDOUT
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
            kill_family(family)  # a work-horse its worker left behind (killed, or timed out)
