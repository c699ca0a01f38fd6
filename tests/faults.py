"""Faults of our own infrastructure, made on purpose: a Redis to flush, kill and restart, a PostgreSQL
database to close to new connections, an S3 endpoint behind a proxy that delays, drops or fails chosen
requests, and the product's worker and scheduler as real processes, always cleaned up.

Everything here is private to the test that uses it: its own ``redis-server`` on a free port, its own
throwaway database (the only kind ever closed), its own proxy in front of the suite's moto server.
"""

from __future__ import annotations

import http.client
import io
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import psycopg
import redis
from sqlalchemy.orm import Session

from lineage_core.infra import migrate
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine
from lineage_core.infra.models import Connector, ConnectorStatus, utcnow
from lineage_core.lineage.importer import import_events
from lineage_core.setup.destination import new_external_id
from tests.processes import family_env, kill_family
from tests.services import PG_ADMIN_URL, free_port

VENDOR_ACCOUNT_ID = "123456789012"  # moto's default account: our side of the trust
WAIT_SECONDS = 90  # upper bound for slow machines; nothing asserts how long anything takes


def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS, logs: Any = None) -> Any:
    """Poll ``condition`` until it is truthy; fail naming ``what`` (with the process logs) otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    detail = f"\n{logs.tail()}" if logs is not None else ""
    raise AssertionError(f"gave up waiting for {what}{detail}")


# Redis -------------------------------------------------------------------------------------------------


class RedisServer:
    """A private ``redis-server`` (nothing on disk) that a test may flush, kill and restart on its port."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not on PATH")
        self.port = free_port()
        self._workdir = workdir
        self._process: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        arguments = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with (self._workdir / f"redis-{self.port}.log").open("ab") as log:
            self._process = subprocess.Popen(
                ["redis-server", *arguments], cwd=self._workdir, stdout=log, stderr=subprocess.STDOUT
            )
        wait_for(self._answers, f"redis-server on port {self.port}", timeout=20)

    def _answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=5)

    def flushall(self) -> None:
        self.client().flushall()

    def kill(self) -> None:
        """SIGKILL: everything it held is gone, every client's connection breaks."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


@contextmanager
def private_redis(workdir: Path) -> Iterator[RedisServer]:
    server = RedisServer(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# PostgreSQL --------------------------------------------------------------------------------------------


class ClosableDatabase:
    """A throwaway database, migrated, that can be closed to every connection and opened again."""

    def __init__(self) -> None:
        self.name = f"olx_fault_{uuid.uuid4().hex[:12]}"
        base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        self.url = f"{base}/{self.name}"
        self.closed = threading.Event()
        self._reopening: list[threading.Thread] = []

    def create(self) -> None:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        migrate.upgrade(self.url)

    def close(self) -> None:
        """No new connections, and every open one terminated (what an outage looks like to clients)."""
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            )
        self.closed.set()

    def reopen(self) -> None:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')
        self.closed.clear()

    def close_for(self, seconds: float) -> threading.Thread:
        """Close now, reopen after ``seconds`` from a thread (joined by :meth:`drop` at the latest)."""
        self.close()
        thread = threading.Thread(target=lambda: (time.sleep(seconds), self.reopen()), daemon=True)
        thread.start()
        self._reopening.append(thread)
        return thread

    def drop(self) -> None:
        # A reopen still pending (its test ended early) would run against a dropped database, and its
        # error would surface in whichever test runs then.
        for thread in self._reopening:
            thread.join()
        get_engine(self.url).dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


@contextmanager
def closable_database() -> Iterator[ClosableDatabase]:
    database = ClosableDatabase()
    database.create()
    try:
        yield database
    finally:
        database.drop()


# S3 behind a fault proxy -------------------------------------------------------------------------------


def request_kind(method: str, path: str, query: dict[str, list[str]]) -> str:
    """The S3 operation of a request, as far as the faults need to tell."""
    if "uploads" in query and method == "POST":
        return "CreateMultipartUpload"
    if "uploadId" in query:
        if method == "PUT" and "partNumber" in query:
            return "UploadPart"
        if method == "POST":
            return "CompleteMultipartUpload"
        if method == "DELETE":
            return "AbortMultipartUpload"
        return "ListParts"
    if method == "PUT" and path.count("/") >= 2:
        return "PutObject"
    if method == "HEAD":
        return "HeadObject"
    return f"{method} {path.split('?')[0]}"


@dataclass
class Fault:
    """What to do with requests of ``kind`` (optionally only part ``part``), at most ``times`` times.

    ``status``: answer this HTTP status with an S3 error body instead of forwarding; ``drop``: close the
    connection without answering; ``delay``: wait that many seconds, then go on; ``before``/``after``:
    call this before forwarding / after moto answered and before the answer goes back.
    """

    kind: str
    status: int | None = None
    code: str = "InternalError"
    drop: bool = False
    delay: float = 0.0
    part: int | None = None
    times: int | None = None
    before: Callable[[], None] | None = None
    after: Callable[[], None] | None = None
    hits: int = 0

    def matches(self, kind: str, query: dict[str, list[str]]) -> bool:
        if kind != self.kind or (self.times is not None and self.hits >= self.times):
            return False
        return self.part is None or query.get("partNumber") == [str(self.part)]


@dataclass
class Seen:
    kind: str
    status: int
    part: int | None = None


class S3FaultProxy:
    """A threaded HTTP proxy on 127.0.0.1 in front of the moto server, injecting :class:`Fault` s."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815 (http.server's names)

        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def kinds(self) -> list[str]:
        with self._lock:
            return [seen.kind for seen in self.seen]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlsplit(handler.path).query, keep_blank_values=True)
        kind = request_kind(handler.command, handler.path, query)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        part = int(query["partNumber"][0]) if "partNumber" in query else None
        with self._lock:
            fault = next((f for f in self.faults if f.matches(kind, query)), None)
            if fault is not None:
                fault.hits += 1
        if fault is not None and fault.before is not None:
            fault.before()
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.drop:
            self._record(kind, 0, part)
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        if fault is not None and fault.status is not None:
            error = (
                '<?xml version="1.0" encoding="UTF-8"?>'
                f"<Error><Code>{fault.code}</Code><Message>injected by the test</Message>"
                "<RequestId>FAULT0000000000</RequestId></Error>"
            ).encode()
            self._record(kind, fault.status, part)
            handler.send_response(fault.status)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(error)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(error)
            return
        status, headers, payload = self._forward(handler, body)
        if fault is not None and fault.after is not None:
            fault.after()
        self._record(kind, status, part)
        handler.send_response(status)
        for name, value in headers:
            if name.lower() not in {"transfer-encoding", "connection", "content-length"}:
                handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)

    def _forward(
        self, handler: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=120)
        try:
            headers = {name: value for name, value in handler.headers.items() if name.lower() != "connection"}
            connection.request(handler.command, handler.path, body=body or None, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            return response.status, list(response.getheaders()), payload
        finally:
            connection.close()

    def _record(self, kind: str, status: int, part: int | None) -> None:
        with self._lock:
            self.seen.append(Seen(kind, status, part))


@contextmanager
def s3_fault_proxy(upstream: str) -> Iterator[S3FaultProxy]:
    proxy = S3FaultProxy(upstream)
    try:
        yield proxy
    finally:
        proxy.close()


# The product's processes -------------------------------------------------------------------------------


@dataclass
class Processes:
    """Real ``python -m worker`` / ``python -m worker.scheduler`` processes, every one stopped at the end.

    ``overrides`` shorten the product's timings for the test (module constants set before the process
    runs, e.g. ``{"lineage_core.export.lease": {"LEASE_SECONDS": 6}}``): the same code, on a faster clock.
    """

    settings: Settings
    workdir: Path
    overrides: dict[str, dict[str, float]] = field(default_factory=dict)
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)
    # Every process started here, and each work-horse they fork, carries this id: stop_all ends them all.
    family: dict[str, str] = field(init=False)
    family_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.family, self.family_id = family_env(self.env())

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": self.settings.database_url,
                "REDIS_URL": self.settings.redis_url,
                "SECRET_KEY": self.settings.secret_key,
                "VENDOR_AWS_ACCOUNT_ID": self.settings.vendor_account_id,
                "AWS_REGION": self.settings.aws_region,
                "AWS_ENDPOINT_URL": self.settings.aws_endpoint_url or "",
                "EXPORT_QUEUE": self.settings.export_queue,
                "REQUIRE_EXTERNAL_ID_ENFORCEMENT": "false",
                "TMPDIR": str(self.workdir),  # the workers' local heartbeat files stay in the test's dir
            }
        )
        return env

    def start(self, module: str) -> subprocess.Popen[bytes]:
        log = self.workdir / f"{module}-{len(self.started)}.log"
        lines = [
            f"import importlib; m = importlib.import_module({name!r}); m.__dict__.update({values!r})"
            for name, values in self.overrides.items()
        ]
        lines.append(f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-c", "\n".join(lines)],
                env=self.family,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[1],
            )
        self.started.append((module, process, log))
        return process

    def tail(self, chars: int = 4000) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-chars:]}" for _m, _p, log in self.started
        )

    def stop_all(self) -> None:
        for _module, process, _log in self.started:
            if process.poll() is None:
                process.terminate()
        for _module, process, _log in self.started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # A work-horse left behind by a killed worker would keep exporting after the test.
        kill_family(self.family_id)


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux /proc; none elsewhere): a worker's work-horse."""
    tasks = Path(f"/proc/{pid}/task")
    children: list[int] = []
    with suppress(OSError):
        for task in tasks.iterdir():
            children += [int(child) for child in (task / "children").read_text().split()]
    return children


@contextmanager
def product_processes(
    settings: Settings, workdir: Path, overrides: dict[str, dict[str, float]] | None = None
) -> Iterator[Processes]:
    processes = Processes(settings, workdir, overrides or {})
    try:
        yield processes
    finally:
        processes.stop_all()


# Rows and lineage --------------------------------------------------------------------------------------


def fault_settings(database_url: str, redis_url: str, aws_endpoint: str) -> Settings:
    return Settings(
        database_url=database_url,
        redis_url=redis_url,
        secret_key="test-secret-key-not-for-production",
        vendor_account_id=VENDOR_ACCOUNT_ID,
        aws_endpoint_url=aws_endpoint,
        aws_region="us-east-1",
        require_external_id_enforcement=False,
        export_queue="exports",
        local_mode=False,
    )


def active_connector(db: Session, organization_id: int, bucket: str, **overrides: Any) -> Connector:
    """An active connector writing to ``bucket`` as a role moto lets anyone assume."""
    values: dict[str, Any] = {
        "organization_id": organization_id,
        "status": ConnectorStatus.ACTIVE,
        "external_id": new_external_id(),
        "bucket": bucket,
        "prefix": "lineage",
        "account_id": "210987654321",
        "role_name": "FoundationalOpenLineageExport",
        "role_arn": "arn:aws:iam::210987654321:role/FoundationalOpenLineageExport",
        "bucket_region": "us-east-1",
        "interval_days": 14,
        "verified_at": utcnow() - timedelta(days=1),
        **overrides,
    }
    connector = Connector(**values)
    db.add(connector)
    db.commit()
    return connector


def store_padded_lineage(db: Session, organization_id: int, jobs: int, sql_bytes: int) -> None:
    """``jobs`` jobs whose SQL facet is about ``sql_bytes`` long: enough of them make a multipart export."""
    lines = []
    for index in range(jobs):
        event = {
            "eventType": "COMPLETE",
            "eventTime": "2026-11-30T12:00:00Z",
            "producer": "https://example.com/tests/faults",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": str(uuid.UUID(int=index + 1))},
            "job": {
                "namespace": "faults",
                "name": f"job_{index:04d}",
                "facets": {
                    "sql": {
                        "_producer": "https://example.com/tests/faults",
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
                        "query": f"-- {index:06d} " + "padding " * (sql_bytes // 8),
                    }
                },
            },
            "inputs": [{"namespace": "postgres://db:5432", "name": f"public.source_{index}"}],
            "outputs": [{"namespace": "postgres://db:5432", "name": f"public.target_{index}"}],
        }
        lines.append(orjson.dumps(event) + b"\n")
    report = import_events(db, organization_id, io.BytesIO(b"".join(lines)))
    assert report.rejected == 0, report


# Everything at once ------------------------------------------------------------------------------------


@dataclass
class FaultStack:
    """One test's own Redis, database and S3 proxy, its settings (S3 through the proxy), a session, an
    organization and an empty bucket."""

    redis: RedisServer
    database: ClosableDatabase
    proxy: S3FaultProxy
    settings: Settings
    db: Session
    organization_id: int
    bucket: str
    s3: Any  # straight to moto, for the test's own looks at the bucket


@contextmanager
def fault_stack(moto_endpoint: str, workdir: Path) -> Iterator[FaultStack]:
    import boto3

    from lineage_core.accounts.organizations import create_organization
    from lineage_core.infra.db import session_factory

    with (
        private_redis(workdir) as redis_server,
        closable_database() as database,
        s3_fault_proxy(moto_endpoint) as proxy,
    ):
        settings = fault_settings(database.url, redis_server.url, proxy.endpoint)
        db = session_factory(database.url)()
        try:
            organization = create_organization(db, f"org-{uuid.uuid4().hex[:8]}", "Faults Inc")
            db.commit()
            bucket = f"faults-{uuid.uuid4().hex[:12]}"
            s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
            s3.create_bucket(Bucket=bucket)
            yield FaultStack(redis_server, database, proxy, settings, db, organization.id, bucket, s3)
        finally:
            db.close()
