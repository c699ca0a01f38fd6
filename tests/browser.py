"""Driving the portal in a real browser: a portal server process, headless Chromium, and wizard steps.

Used by ``tests/test_browser_wizard.py``; the steps take a Playwright ``Page`` and a base URL only, so a
script can walk a portal started some other way (``scripts/run-local``) with the same code.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
from playwright.sync_api import Browser, Locator, Page, Playwright, expect

CHROMIUM = "/usr/bin/chromium"
# Debian's chromium; Playwright cannot download its own browser on these machines.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch_chromium(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


@dataclass(frozen=True)
class PortalServer:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def wait_until_ready(self, timeout_s: float = 30) -> None:
        """Until the login page answers; fails with the end of the log if the server exits or hangs."""
        url = f"{self.base_url}/login"
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the portal exited ({self.process.returncode}):\n{log_tail(self.log_path)}"
                )
            try:
                if requests.get(url, timeout=2).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):  # not listening, or still booting
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"no answer from {url} in {timeout_s} s:\n{log_tail(self.log_path)}")
            time.sleep(0.1)


@contextmanager
def running_portal(env: dict[str, str], port: int, log_path: Path) -> Iterator[PortalServer]:
    """Starts the portal under gunicorn, as the Procfile runs it, on ``port``; stops it afterwards.

    Does not wait for it: call :meth:`PortalServer.wait_until_ready` (start the browser meanwhile).
    The server's output goes to ``log_path``.
    """
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--bind",
                f"127.0.0.1:{port}",
                # One process importing the app boots faster than the Procfile's two; threads serve
                # the browser's parallel requests.
                "--workers",
                "1",
                "--threads",
                "4",
                "--access-logfile",
                "-",
                # gunicorn 27 opens a control socket at one fixed path in $HOME by default: several
                # servers on one machine (parallel runs, a run-local portal) would share it.
                "--no-control-socket",
                "portal:create_app()",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield PortalServer(process, f"http://127.0.0.1:{port}", log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def log_tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


@dataclass(frozen=True)
class Connection:
    """What the admin types into "Set Up New Connection"."""

    bucket: str
    prefix: str
    account_id: str
    role_name: str


def sign_in(page: Page, base_url: str, email: str, password: str) -> None:
    page.goto(f"{base_url}/login")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def open_openlineage_accounts(page: Page) -> None:
    """Integrations page → Catalogs → the OpenLineage card → Connect (spec, Part 1, steps 1-2)."""
    page.get_by_role("navigation").get_by_role("link", name="Integrations").click()
    expect(page.get_by_role("heading", name="Integrations", level=1)).to_be_visible()
    catalogs = page.locator("section").filter(has=page.get_by_role("heading", name="Catalogs"))
    card = catalogs.locator("article.card").filter(has=page.get_by_role("heading", name="OpenLineage"))
    card.get_by_role("link", name="Connect").click()
    expect(page.get_by_role("heading", name="OpenLineage export to Amazon S3")).to_be_visible()


def fill_new_connection(page: Page, connection: Connection) -> str:
    """Add Account → Start Setup → fill "Set Up New Connection" (steps 3-5). Returns the External ID.

    Checks that the External ID is shown read-only and that typing into it changes nothing.
    """
    page.get_by_role("link", name="Add Account").click()
    page.get_by_role("button", name="Start Setup").click()
    expect(page.get_by_role("heading", name="Set Up New Connection")).to_be_visible()
    page.get_by_label("S3 Bucket Name").fill(connection.bucket)
    page.get_by_label("Prefix (optional)").fill(connection.prefix)
    page.get_by_label("AWS Account ID").fill(connection.account_id)
    page.get_by_label("IAM Role Name").fill(connection.role_name)
    expect(page.get_by_label("Export Interval (days)")).to_have_value("14")

    external_id_field = page.get_by_label("External ID", exact=True)
    expect(external_id_field).not_to_be_editable()
    external_id = external_id_field.input_value()
    assert len(external_id) >= 16, external_id
    external_id_field.click()
    page.keyboard.press("End")
    page.keyboard.type("-edited")
    expect(external_id_field).to_have_value(external_id)
    return external_id


def go_to_download_screen(page: Page, external_id: str) -> None:
    page.get_by_role("button", name="Next").click()
    expect(page.get_by_role("heading", name="Deploy the role in AWS")).to_be_visible()
    expect(page.locator("#external-id")).to_have_text(external_id)


def deploy_to_local_aws(page: Page, role_name: str) -> None:
    """The local demo's stand-in for Part 2: the button deploys the template to the local endpoint."""
    page.get_by_role("button", name="Deploy template to local AWS").click()
    expect(page.locator(".flash-success")).to_contain_text(f":role/{role_name}")
    expect(page.get_by_role("heading", name="Deploy the role in AWS")).to_be_visible()


def click_save(page: Page) -> None:
    page.get_by_role("button", name="Save", exact=True).click()


def connector_card(page: Page, bucket: str, prefix: str) -> Locator:
    """The card whose heading is the connection's s3:// location."""
    heading = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    return page.locator("article.connector-card").filter(
        has=page.get_by_role("heading", name=heading, exact=True)
    )
