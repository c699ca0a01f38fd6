"""The stack-update instructions in a real browser, during a rotation: from the card's hint to the table
of values and the CLI command, whose Copy gives exactly the command. A screenshot of the page goes to
``tmp_path`` (and ``STACK_UPDATE_SCREENSHOTS``, if set).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, Organization, User
from tests.browser import CHROMIUM, launch_chromium, log_tail, running_portal, sign_in
from tests.factories import make_connector
from tests.services import free_port, process_env
from tests.web import PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (Debian package)"),
]


def _new_external_id(db: Session, connector_id: int) -> str:
    db.expire_all()
    found = db.get(Connector, connector_id)
    assert found is not None and found.new_external_id
    db.rollback()
    return found.new_external_id


def test_a_pending_rotation_shows_the_values_and_the_command_to_update_the_stack(
    settings: Settings, admin: User, org: Organization, db: Session, tmp_path: Path
) -> None:
    connector = make_connector(db, org)
    current = connector.external_id
    server_log = tmp_path / "portal.log"
    with running_portal(process_env(settings), free_port(), server_log) as server, sync_playwright() as pw:
        browser = launch_chromium(pw)
        server.wait_until_ready()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
        context.set_default_timeout(10_000)
        page = context.new_page()
        try:
            sign_in(page, server.base_url, admin.email, PASSWORD)
            page.goto(f"{server.base_url}/integrations/openlineage")
            card = page.locator(f"#connector-{connector.id}")
            card.get_by_role("button", name="Rotate External ID").click()
            new = _new_external_id(db, connector.id)

            expect(card.locator(".stack-update-hint")).to_contain_text(
                "CloudFormation's Parameters page keeps the stack's current values"
            )
            card.locator(".stack-update-hint").get_by_role("link", name="Update the stack").click()
            section = page.locator("#stack-update")
            expect(section.get_by_role("heading", name="Update the stack")).to_be_visible()
            expect(section.locator("#parameter-ExternalId")).to_have_text(current)
            expect(section.locator("#parameter-NewExternalId")).to_have_text(new)
            expect(section.locator('tr[data-parameter="KmsKeyArn"]')).to_contain_text(
                "Empty: clear the field"
            )

            section.get_by_role("button", name="Copy command").click()
            expect(section.get_by_role("button", name="Copied")).to_be_visible()
            copied = page.evaluate("navigator.clipboard.readText()")
            words = shlex.split(copied.replace("\\\n", ""))
            assert f"ParameterKey=ExternalId,ParameterValue={current}" in words
            assert f"ParameterKey=NewExternalId,ParameterValue={new}" in words
            assert "ParameterKey=KmsKeyArn,ParameterValue=" in words

            folders = [tmp_path] + (
                [Path(os.environ["STACK_UPDATE_SCREENSHOTS"])]
                if "STACK_UPDATE_SCREENSHOTS" in os.environ
                else []
            )
            for folder in folders:
                page.screenshot(path=str(folder / "stack-update-pending.png"), full_page=True)
        except Exception:
            print(log_tail(server_log))
            raise
        finally:
            context.close()
            browser.close()
