"""A new admin walks the spec's Parts 1-4 in Chromium, then an operator opens /admin/rq/.

Against a real portal (gunicorn, local mode, so "Deploy template to local AWS" stands in for Part 2) and
a real worker, on this run's PostgreSQL, Redis and moto server. On the way, both Troubleshooting errors
appear on the page before the connection succeeds; the cards show the last export's time and status and
update themselves (no reload) when the worker finishes; Delete asks first; "API key created" renders as
a page. Screenshots of every screen go to ``tmp_path`` (kept by pytest for the last runs).
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Page, Response, expect, sync_playwright
from redis import Redis
from rq import Queue
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.models import Role, User
from tests.browser import (
    CHROMIUM,
    Connection,
    click_save,
    connector_card,
    fill_new_connection,
    go_to_download_screen,
    launch_chromium,
    log_tail,
    open_openlineage_accounts,
    running_portal,
    sign_in,
)
from tests.factories import make_user
from tests.services import free_port, process_env, running_process, s3_client
from tests.web import CUSTOMER_ACCOUNT, PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (Debian package)"),
]

NEW = Connection(
    bucket="acme-lineage-walkthrough-with-a-rather-long-bucket-name",
    prefix="foundational/openlineage",
    account_id=CUSTOMER_ACCOUNT,
    role_name="FoundationalOpenLineageExport",
)
ROLE_ARN = f"arn:aws:iam::{NEW.account_id}:role/{NEW.role_name}"
EXPORT_KEY = f"{NEW.prefix}/openlineage-events.jsonl"
WORKER_WAIT_MS = 120_000  # an upper bound on a loaded machine: a worker's start and one small export


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=tmp_path / f"{name}.png", full_page=True)


def _queues(settings: Settings) -> dict[str, object]:
    """What Redis holds for the export queue, to explain an export that never ran."""
    queue = Queue(settings.export_queue, connection=Redis.from_url(settings.redis_url))
    return {
        "queued": queue.job_ids,
        "started": queue.started_job_registry.get_job_ids(),
        "failed": queue.failed_job_registry.get_job_ids(),
        "finished": queue.finished_job_registry.get_job_ids(),
    }


def _mark_page(page: Page) -> None:
    """A marker that a reload (or any navigation) would wipe: the card must change with it in place."""
    page.evaluate("window.__stillTheSamePage = true")


def _same_page(page: Page) -> bool:
    return bool(page.evaluate("window.__stillTheSamePage === true"))


def test_a_new_admin_walks_parts_1_to_4_and_an_operator_opens_the_dashboard(
    aws: str, settings: Settings, admin: User, db: Session, tmp_path: Path
) -> None:
    operator = make_user(db, None, "ops@vendor.test", Role.OPERATOR)
    s3 = s3_client(aws)
    env = {**process_env(settings), "LOCAL_MODE": "true"}
    server_log, worker_log = tmp_path / "portal.log", tmp_path / "worker.log"
    errors: list[str] = []

    def record_failure(response: Response) -> None:
        if (
            response.status >= 400
            and not response.url.endswith("/favicon.ico")
            and "/missing" not in response.url
        ):
            errors.append(f"{response.status} {response.request.method} {response.url}")

    def record_console(message: ConsoleMessage, who: str) -> None:
        url = message.location.get("url", "")
        if message.type == "error" and "/missing" not in url and not url.endswith("/favicon.ico"):
            errors.append(f"{who}: {message.text} ({message.location.get('url')})")

    with ExitStack() as stack:
        server = stack.enter_context(running_portal(env, free_port(), server_log))
        playwright = stack.enter_context(sync_playwright())
        browser = launch_chromium(playwright)
        stack.callback(browser.close)
        server.wait_until_ready()
        base_url = server.base_url
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(10_000)
        stack.callback(context.close)
        page = context.new_page()
        page.on("response", record_failure)
        page.on("console", lambda message: record_console(message, "admin"))
        try:
            # Part 1: configure the destination, as the spec words it.
            sign_in(page, base_url, admin.email, PASSWORD)
            open_openlineage_accounts(page)
            external_id = fill_new_connection(page, NEW)
            expect(page.get_by_role("button", name="Copy")).to_be_visible()  # beside the External ID
            _shot(page, tmp_path, "01-set-up-new-connection")
            go_to_download_screen(page, external_id)
            with page.expect_download() as download:
                page.get_by_role("link", name="Download YAML File").click()
            assert download.value.suggested_filename == f"openlineage-export-{NEW.role_name}.yaml"
            expect(page.locator("#quick-create")).to_have_count(0)  # no public template URL locally
            _shot(page, tmp_path, "02-download-screen")

            # Part 3 before Part 2: the role does not exist yet. Troubleshooting, first row.
            click_save(page)
            error = page.locator("#save-error")
            expect(error).to_contain_text(f"Could not assume the trust role {ROLE_ARN}")
            expect(error).to_contain_text(f"there is no role {NEW.role_name} in AWS account {NEW.account_id}")
            expect(page.get_by_role("alert")).to_contain_text("Could not assume the trust role")
            assert re.search(r"/deploy#connect$", page.url), page.url  # the connection's page, not /save
            _shot(page, tmp_path, "03-save-could-not-assume")

            # Part 2, the local stand-in; the bucket does not exist yet. Troubleshooting, second row.
            page.get_by_role("button", name="Deploy template to local AWS").click()
            expect(page.locator(".flash-success")).to_contain_text(f"it created {ROLE_ARN}")
            click_save(page)
            expect(error).to_contain_text(f"Could not write to s3://{NEW.bucket}/{NEW.prefix}/")
            expect(error).to_contain_text("does not exist")
            _shot(page, tmp_path, "04-save-could-not-write")

            # The admin creates the bucket and saves again: connected; the first export waits for a worker.
            s3.create_bucket(Bucket=NEW.bucket)
            click_save(page)
            expect(page.locator(".flash-success")).to_have_text(
                "Connected. The first export is queued and starts in a moment."
            )
            card = connector_card(page, NEW.bucket, NEW.prefix)
            expect(card.locator(".status")).to_have_text("Export queued")
            expect(card.locator(".last-export")).to_have_text("No export yet")
            expect(card.get_by_role("button", name="Export now")).to_be_disabled()
            _shot(page, tmp_path, "05-card-export-queued")

            # A worker starts; the card follows the export without a reload.
            _mark_page(page)
            stack.enter_context(running_process(settings, "worker", worker_log))
            expect(card.locator(".status")).to_have_text("Healthy", timeout=WORKER_WAIT_MS)
            expect(card.locator('[data-field="last_text"]')).to_have_text(
                re.compile(r"^Succeeded at \d{4}-\d\d-\d\d \d\d:\d\d UTC$")
            )
            expect(card.get_by_role("button", name="Export now")).to_be_enabled()
            assert _same_page(page), "the page was reloaded"
            first_export = card.locator('[data-field="last_text"]').inner_text()
            s3.head_object(Bucket=NEW.bucket, Key=EXPORT_KEY)
            _shot(page, tmp_path, "06-card-healthy")

            # "Export now": the card goes back to queued or running and ends Healthy, without a reload.
            card.get_by_role("button", name="Export now").click()
            expect(page.locator(".flash-success")).to_have_text("Export started.")
            _mark_page(page)
            expect(card.locator(".status")).to_have_text("Healthy", timeout=WORKER_WAIT_MS)
            expect(card.get_by_role("button", name="Export now")).to_be_enabled(timeout=WORKER_WAIT_MS)
            assert _same_page(page), "the page was reloaded"
            assert card.locator('[data-field="last_text"]').inner_text() >= first_export

            # The Integrations page's card: the time and status of the last export (spec).
            page.get_by_role("navigation").get_by_role("link", name="Integrations").click()
            account = page.locator("#openlineage-card .account")
            expect(page.locator("#openlineage-card")).to_contain_text("1 account")
            expect(account.locator(".status")).to_have_text("Healthy")
            expect(account.locator(".last-export")).to_have_text(
                re.compile(r"^Last export: Succeeded at .+ UTC$")
            )
            _shot(page, tmp_path, "07-integrations-card")

            # Part 4: read the export.
            open_openlineage_accounts(page)
            card.get_by_role("link", name="Read the export").click()
            expect(page.locator("#read-bucket")).to_have_text(NEW.bucket)
            expect(page.locator("#read-prefix")).to_have_text(NEW.prefix)
            expect(page.get_by_text("*.jsonl", exact=True)).to_be_visible()
            expect(page.get_by_role("button", name="Copy policy")).to_be_visible()
            page.set_viewport_size({"width": 420, "height": 900})
            _shot(page, tmp_path, "08-read-the-export-narrow")
            page.goto(f"{base_url}/integrations/openlineage")
            _shot(page, tmp_path, "09-cards-narrow")
            page.set_viewport_size({"width": 1280, "height": 900})

            # Edit speaks of an edit.
            card.get_by_role("link", name="Edit").click()
            expect(page.get_by_role("heading", name="Edit Connection")).to_be_visible()
            expect(page.get_by_role("button", name="Save changes")).to_be_visible()
            _shot(page, tmp_path, "10-edit-connection")

            # Delete asks first, and Cancel keeps the connection.
            open_openlineage_accounts(page)
            card.get_by_role("link", name="Delete").click()
            expect(page.get_by_role("heading", name="Delete this connection?")).to_be_visible()
            expect(page.locator("main")).to_contain_text(
                f"stops every export to s3://{NEW.bucket}/{NEW.prefix}/"
            )
            _shot(page, tmp_path, "11-delete-asks-first")
            page.get_by_role("link", name="Cancel").click()
            expect(card.locator(".status")).to_have_text("Healthy")

            # An API key: the created page is a page, not its HTML source; Revoke asks first.
            page.get_by_role("navigation").get_by_role("link", name="API keys").click()
            page.get_by_label("Name").fill("airflow-prod")
            page.get_by_role("button", name="Create key").click()
            expect(page.get_by_role("heading", name="API key created", level=1)).to_be_visible()
            expect(page.locator("#new-api-key")).to_have_text(re.compile(r"^olk_[0-9a-f]{8}_"))
            assert "<h1>" not in page.locator("body").inner_text()
            _shot(page, tmp_path, "12-api-key-created")
            page.get_by_role("link", name="← API keys").click()
            page.get_by_role("link", name="Revoke").click()
            expect(page.get_by_role("heading", name="Revoke key airflow-prod?")).to_be_visible()
            _shot(page, tmp_path, "13-revoke-asks-first")

            # An error page is one of ours.
            page.goto(f"{base_url}/integrations/openlineage/999999/missing")
            expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
            expect(page.get_by_role("navigation").get_by_role("link", name="Integrations")).to_be_visible()
            _shot(page, tmp_path, "14-not-found")

            # The operator: /admin/rq/ shows queues and workers, and a job's page opens.
            ops = browser.new_context(viewport={"width": 1280, "height": 900})
            stack.callback(ops.close)
            ops.set_default_timeout(10_000)
            dashboard = ops.new_page()
            dashboard.on("console", lambda message: record_console(message, "operator"))
            sign_in(dashboard, base_url, operator.email, PASSWORD)
            dashboard.goto(f"{base_url}/admin/rq/")
            queues = dashboard.locator("#queues tr[data-role=queue]")
            expect(queues.filter(has_text=settings.export_queue).first).to_be_visible()
            expect(dashboard.locator("#queues")).not_to_contain_text("Loading...")
            _shot(dashboard, tmp_path, "15-rq-queues")
            dashboard.goto(f"{base_url}/admin/rq/0/view/workers")
            expect(dashboard.locator("#workers tr[data-role=worker]").first).to_be_visible()
            expect(dashboard.locator("#workers")).to_contain_text(settings.export_queue)
            _shot(dashboard, tmp_path, "16-rq-workers")
            dashboard.goto(f"{base_url}/admin/rq/0/view/jobs/{settings.export_queue}/finished/8/asc/1")
            job_link = dashboard.locator("#jobs tr[data-role=job] .job_id a").first
            expect(job_link).to_have_text(re.compile(r"^export-run-\d+$"))
            job_id = job_link.inner_text()
            job_link.click()
            expect(dashboard.get_by_role("heading", level=2)).to_have_text(f"Job ID: {job_id}")
            expect(dashboard.locator("#job-data")).to_contain_text("Status:finished")
            _shot(dashboard, tmp_path, "17-rq-job")
        except AssertionError as failure:
            page.screenshot(path=tmp_path / "at-failure.png", full_page=True)
            raise AssertionError(
                f"{failure}\n--- queues: {_queues(settings)}\n--- portal log:\n{log_tail(server_log)}"
                f"\n--- worker log:\n{log_tail(worker_log)}"
            ) from failure

    # 404 of the made-up URL is expected; nothing else failed, and no script error (CSP included).
    assert errors == [], errors
