"""The export's checksum as an admin sees it in Chromium: on the card and on the History page, equal to
what a reader computes from the file in the bucket; "Read the export" with its checks. Screenshots go to
``tmp_path`` (and /tmp, to look at).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect, sync_playwright
from sqlalchemy.orm import Session

from lineage_core.export import checksum
from lineage_core.export.run import run_export
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Organization, User, utcnow
from tests.browser import CHROMIUM, connector_card, launch_chromium, running_portal, sign_in
from tests.factories import BUCKET, PREFIX, feature_events, make_connector, make_run, store_events
from tests.readback import body
from tests.services import free_port, process_env
from tests.web import PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (Debian package)"),
]


def test_card_and_history_show_the_checksum_a_reader_computes(
    settings: Settings, db: Session, org: Organization, admin: User, s3: Any, tmp_path: Path
) -> None:
    store_events(db, org.id, feature_events(jobs=12))
    connector = make_connector(db, org, verified_at=utcnow())
    run_export(settings, make_run(db, connector).id)
    expected = checksum.encoded_crc(body(s3))

    with (
        running_portal(process_env(settings), free_port(), tmp_path / "portal.log") as server,
        sync_playwright() as playwright,
    ):
        browser = launch_chromium(playwright)
        server.wait_until_ready()
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(10_000)
        sign_in(page, server.base_url, admin.email, PASSWORD)

        page.goto(f"{server.base_url}/integrations/openlineage")
        card = connector_card(page, BUCKET, PREFIX)
        expect(card.locator('[data-field="checksum_note"]')).to_have_text(f"Checksum (CRC64NVME): {expected}")
        page.screenshot(path=str(tmp_path / "card.png"), full_page=True)

        card.get_by_role("link", name="History").click()
        expect(page.get_by_role("heading", name="Export history")).to_be_visible()
        expect(page.get_by_role("columnheader", name="Checksum (CRC64NVME)")).to_be_visible()
        expect(page.locator("#history td.checksum")).to_have_text([expected])
        page.screenshot(path=str(tmp_path / "history.png"), full_page=True)

        page.goto(f"{server.base_url}/integrations/openlineage/{connector.id}/read")
        expect(page.get_by_role("heading", name="Check the file")).to_be_visible()
        expect(page.locator("#read-filter-prefix")).to_have_text(f"{PREFIX}/openlineage-events.jsonl")
        page.screenshot(path=str(tmp_path / "read.png"), full_page=True)
        browser.close()
    for name in ("card.png", "history.png", "read.png"):
        shutil.copy(tmp_path / name, Path("/tmp") / f"export-checksum-{name}")
