"""The API keys page in a real browser: an admin ticks the scopes of a new key, and the key works for
exactly those (the connections API answers it, the ingest endpoint refuses it). Screenshots of the form
and of the new key go to ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect, sync_playwright

from lineage_core.infra.config import Settings
from lineage_core.infra.models import User
from tests.browser import CHROMIUM, launch_chromium, running_portal, sign_in
from tests.services import free_port, process_env
from tests.web import PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (Debian package)"),
]


def test_an_admin_creates_a_connections_key_by_ticking_its_scopes(
    settings: Settings, admin: User, tmp_path: Path
) -> None:
    with (
        running_portal(process_env(settings), free_port(), tmp_path / "portal.log") as server,
        sync_playwright() as p,
    ):
        browser = launch_chromium(p)
        server.wait_until_ready()
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(10_000)
        sign_in(page, server.base_url, admin.email, PASSWORD)
        page.goto(f"{server.base_url}/api-keys/")
        ingest = page.get_by_label("lineage:write: send OpenLineage events (Airflow, dbt, Spark)")
        expect(ingest).to_be_checked()  # the default, as keys had before scopes
        page.get_by_label("Name").fill("terraform-setup")
        ingest.uncheck()
        page.get_by_label(
            "connections:write: create, change, activate, pause and delete export connections (reads too)"
        ).check()
        page.screenshot(path=str(tmp_path / "api-keys-scopes.png"), full_page=True)
        page.get_by_role("button", name="Create key").click()
        expect(page.get_by_role("heading", name="API key created")).to_be_visible()
        expect(page.locator("#new-api-key-scopes")).to_have_text("connections:write")
        secret = page.locator("#new-api-key").inner_text()
        page.screenshot(path=str(tmp_path / "api-key-created.png"), full_page=True)
        browser.close()

        headers = {"Authorization": f"Bearer {secret}"}
        listed = requests.get(f"{server.base_url}/api/v1/connections", headers=headers, timeout=10)
        assert (listed.status_code, listed.json()) == (200, {"connections": []})
        refused = requests.post(f"{server.base_url}/api/v1/lineage", headers=headers, json={}, timeout=10)
        assert refused.status_code == 403 and refused.json()["error"] == "insufficient_scope"
