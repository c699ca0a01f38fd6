"""The setup wizard in a real browser (spec, Parts 1-3), against a real portal server process.

Headless Chromium (Debian's package) driven through Playwright; the portal runs under gunicorn in
local mode against this run's PostgreSQL, Redis and moto server, so "Deploy template to local AWS"
stands in for Part 2. Screenshots of the failed Save and of the final cards page go to ``tmp_path``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, Response, expect, sync_playwright
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ConnectorStatus, User
from tests.browser import (
    CHROMIUM,
    Connection,
    click_save,
    connector_card,
    deploy_to_local_aws,
    fill_new_connection,
    go_to_download_screen,
    launch_chromium,
    log_tail,
    open_openlineage_accounts,
    running_portal,
    sign_in,
)
from tests.services import free_port, process_env, s3_client
from tests.web import CUSTOMER_ACCOUNT, PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (Debian package)"),
]

FIRST_EXPORT_QUEUED = "Connected. The first export is queued and starts in a moment."
FIRST = Connection(
    bucket="acme-lineage",
    prefix="foundational/openlineage",
    account_id=CUSTOMER_ACCOUNT,
    role_name="FoundationalOpenLineageExport",
)
# Its bucket does not exist until the admin creates it, after the first Save failed.
SECOND = Connection(
    bucket="acme-lineage-second",
    prefix="exports",
    account_id=CUSTOMER_ACCOUNT,
    role_name="SecondOpenLineageExport",
)


def _role_arn(connection: Connection) -> str:
    return f"arn:aws:iam::{connection.account_id}:role/{connection.role_name}"


def _download_template(page: Page, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """Click "Download YAML File"; returns the file name the browser was given and the parsed YAML."""
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download YAML File").click()
    download = download_info.value
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    return download.suggested_filename, yaml.safe_load(target.read_text(encoding="utf-8"))


def _status_of(db: Session, bucket: str) -> ConnectorStatus:
    db.expire_all()
    return db.scalars(select(Connector.status).where(Connector.bucket == bucket)).one()


def test_wizard_download_local_deploy_and_save_in_chromium(
    aws: str, settings: Settings, admin: User, db: Session, tmp_path: Path
) -> None:
    s3 = s3_client(aws)
    s3.create_bucket(Bucket=FIRST.bucket)
    env = {**process_env(settings), "LOCAL_MODE": "true"}
    server_log = tmp_path / "portal.log"
    failed_responses: list[str] = []

    def record_failure(response: Response) -> None:
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            failed_responses.append(f"{response.status} {response.request.method} {response.url}")

    with (
        running_portal(env, free_port(), server_log) as server,
        sync_playwright() as playwright,
    ):
        browser = launch_chromium(playwright)  # while the server boots
        server.wait_until_ready()
        base_url = server.base_url
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(10_000)
        page = context.new_page()
        page.on("response", record_failure)
        try:
            # Part 1: configure the destination.
            sign_in(page, base_url, admin.email, PASSWORD)
            open_openlineage_accounts(page)
            external_id = fill_new_connection(page, FIRST)
            go_to_download_screen(page, external_id)

            file_name, template = _download_template(page, tmp_path)
            assert file_name == f"openlineage-export-{FIRST.role_name}.yaml"
            defaults = {name: p.get("Default") for name, p in template["Parameters"].items()}
            assert defaults["BucketName"] == FIRST.bucket
            assert defaults["Prefix"] == FIRST.prefix
            assert defaults["CustomerAccountId"] == FIRST.account_id
            assert defaults["RoleName"] == FIRST.role_name
            assert defaults["ExternalId"] == external_id
            assert defaults["VendorAccountId"] == settings.vendor_account_id

            # Part 2 (local stand-in) and Part 3: Save runs the write check and activates.
            deploy_to_local_aws(page, FIRST.role_name)
            click_save(page)
            expect(page.get_by_role("heading", name="OpenLineage export to Amazon S3")).to_be_visible()
            expect(page.locator(".flash-success")).to_have_text(FIRST_EXPORT_QUEUED)
            card = connector_card(page, FIRST.bucket, FIRST.prefix)
            expect(card.locator(".status")).to_have_text("Export queued")
            expect(card).to_contain_text(_role_arn(FIRST))
            expect(card.locator(".last-export")).to_have_text("No export yet")
            # No worker runs here, so the first export stays queued and "Export now" is refused.
            expect(card.locator(".in-flight")).to_have_text("Export queued")
            expect(card.get_by_role("button", name="Export now")).to_be_disabled()
            assert _status_of(db, FIRST.bucket) is ConnectorStatus.ACTIVE

            # A second account whose bucket does not exist yet: Save fails and says why.
            open_openlineage_accounts(page)
            second_external_id = fill_new_connection(page, SECOND)
            assert second_external_id != external_id
            go_to_download_screen(page, second_external_id)
            deploy_to_local_aws(page, SECOND.role_name)
            click_save(page)
            error = page.locator("#save-error")
            location = re.escape(f"s3://{SECOND.bucket}/{SECOND.prefix}/")
            expect(error).to_have_text(re.compile(f"^Could not write to {location}"))
            expect(error).to_contain_text("does not exist")
            # The admin sees it without scrolling: the page opens at the Save section, and the
            # alert at the top of the page says the same.
            expect(error).to_be_in_viewport()
            expect(page.get_by_role("alert")).to_contain_text("Could not write to")
            expect(page.get_by_role("button", name="Save", exact=True)).to_be_visible()
            page.screenshot(path=tmp_path / "failed-save.png", full_page=True)
            page.screenshot(path=tmp_path / "failed-save-as-seen.png")  # the viewport only
            assert _status_of(db, SECOND.bucket) is ConnectorStatus.DRAFT

            # The admin creates the bucket and saves again from the same screen.
            s3.create_bucket(Bucket=SECOND.bucket)
            click_save(page)
            expect(page.locator(".flash-success")).to_have_text(FIRST_EXPORT_QUEUED)
            second_card = connector_card(page, SECOND.bucket, SECOND.prefix)
            expect(second_card.locator(".status")).to_have_text("Export queued")
            expect(second_card).to_contain_text(_role_arn(SECOND))
            expect(second_card.locator(".last-export")).to_have_text("No export yet")
            expect(page.locator("article.connector-card .status")).to_have_text(
                ["Export queued", "Export queued"]
            )
            page.screenshot(path=tmp_path / "cards.png", full_page=True)
            assert _status_of(db, SECOND.bucket) is ConnectorStatus.ACTIVE
        except AssertionError as failure:
            page.screenshot(path=tmp_path / "at-failure.png", full_page=True)
            raise AssertionError(f"{failure}\n--- portal log:\n{log_tail(server_log)}") from failure
        finally:
            context.close()
            browser.close()

    assert failed_responses == [], failed_responses
