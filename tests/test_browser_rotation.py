"""External ID rotation on the card, in a real browser: pending, verified with the old ID still working,
complete. Screenshots of each state go to ``tmp_path`` (and ``ROTATION_SCREENSHOTS``, if set).

The portal runs under gunicorn in local mode against this run's PostgreSQL, Redis and moto server. The
admin's stack updates are the role's trust policy changed through the local IAM; the exports between
the steps run in this process against the same database, as the worker would run them.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import boto3
import pytest
import yaml
from playwright.sync_api import Locator, Page, expect, sync_playwright
from sqlalchemy.orm import Session

from lineage_core.export.run import run_export
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, Organization, RotationState, User
from lineage_core.setup.cloudformation import expected_policies
from lineage_core.setup.destination import role_arn
from lineage_core.setup.role_spec import RoleSpec
from tests.browser import CHROMIUM, launch_chromium, log_tail, running_portal, sign_in
from tests.factories import create_role_through_iam, make_connector, make_run
from tests.services import VENDOR_ACCOUNT_ID, free_port, process_env, s3_client
from tests.web import CUSTOMER_ACCOUNT, PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (Debian package)"),
]

ROLE = "FoundationalOpenLineageExport"


def _trust_only(aws: str, connector: Connector, *external_ids: str) -> None:
    """Update the stack, as far as the role's trust goes: it accepts exactly ``external_ids``."""
    spec = replace(
        RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID),
        external_id=external_ids[0],
        new_external_id=external_ids[1] if len(external_ids) > 1 else None,
    )
    trust = expected_policies(spec)["trust_policy"]
    iam = boto3.client("iam", endpoint_url=aws, region_name="us-east-1")
    iam.update_assume_role_policy(RoleName=ROLE, PolicyDocument=json.dumps(trust))


def _fresh(db: Session, connector_id: int) -> Connector:
    db.expire_all()
    found = db.get(Connector, connector_id)
    assert found is not None
    db.rollback()
    return found


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    folders = [tmp_path] + (
        [Path(os.environ["ROTATION_SCREENSHOTS"])] if "ROTATION_SCREENSHOTS" in os.environ else []
    )
    for folder in folders:
        page.screenshot(path=str(folder / f"rotation-{name}.png"), full_page=True)


def test_rotation_pending_verified_complete_on_the_card(
    aws: str, settings: Settings, admin: User, org: Organization, db: Session, tmp_path: Path
) -> None:
    s3_client(aws).create_bucket(Bucket="acme-lineage")
    connector = make_connector(
        db, org, account_id=CUSTOMER_ACCOUNT, role_arn=role_arn("aws", CUSTOMER_ACCOUNT, "/", ROLE)
    )
    current = connector.external_id
    create_role_through_iam(aws, RoleSpec.for_connector(connector, VENDOR_ACCOUNT_ID))
    local = replace(settings, local_mode=True)
    env = {**process_env(settings), "LOCAL_MODE": "true"}
    server_log = tmp_path / "portal.log"

    with running_portal(env, free_port(), server_log) as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        server.wait_until_ready()
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(10_000)
        page = context.new_page()
        try:
            sign_in(page, server.base_url, admin.email, PASSWORD)
            page.goto(f"{server.base_url}/integrations/openlineage")
            card: Locator = page.locator(f"#connector-{connector.id}")
            expect(card.locator(f"#external-id-{connector.id}")).to_have_text(current)

            # Pending: the new ID, the downloads, the instruction to update the stack and click Save.
            card.get_by_role("button", name="Rotate External ID").click()
            expect(page.get_by_role("alert").or_(page.locator(".flash")).first).to_contain_text(
                "A new External ID is ready."
            )
            new = _fresh(db, connector.id).new_external_id or ""
            expect(card.locator(f"#new-external-id-{connector.id}")).to_have_text(new)
            expect(card.locator(".rotation-message")).to_contain_text(
                f"update the stack in AWS account {CUSTOMER_ACCOUNT} with it, then click Save"
            )
            expect(card.get_by_role("button", name="Rotate External ID")).to_have_count(0)
            with page.expect_download() as download:
                card.get_by_role("link", name="Download YAML File").click()
            template = yaml.safe_load(Path(download.value.path()).read_text(encoding="utf-8"))
            assert template["Parameters"]["ExternalId"]["Default"] == current
            assert template["Parameters"]["NewExternalId"]["Default"] == new
            _shot(page, tmp_path, "pending")

            # The stack updated with both IDs; Save checks the new one.
            _trust_only(aws, connector, current, new)
            card.get_by_role("button", name="Save").click()
            expect(card.locator(".rotation-message")).to_contain_text("Exports now use the new External ID.")
            expect(card.locator(".old-check")).to_have_text("Not checked yet")
            assert _fresh(db, connector.id).rotation_state is RotationState.VERIFIED

            # Verified, the old ID still working: an export checked it.
            assert run_export(local, make_run(db, connector).id) is not None
            checked = _fresh(db, connector.id).old_external_id_checked_at
            assert checked is not None
            page.reload()
            expect(card.locator(".old-check")).to_have_text(
                f"Yes, checked at {checked.strftime('%Y-%m-%d %H:%M UTC')}"
            )
            expect(card.locator(".rotation-message")).to_contain_text(
                "Update the stack again with the template downloaded now to drop it."
            )
            expect(card.get_by_role("button", name="Cancel rotation")).to_have_count(0)
            _shot(page, tmp_path, "verified-old-still-works")

            # The stack updated again with the new ID only: the next export finds the old one refused.
            _trust_only(aws, connector, new)
            assert run_export(local, make_run(db, connector).id) is not None
            page.reload()
            expect(card.locator(".rotation-message")).to_contain_text(
                "Rotation complete: the old External ID no longer works"
            )
            expect(card.locator(".old-check")).to_contain_text("No, checked at")
            expect(card.locator(f"#external-id-{connector.id}")).to_have_text(new)
            expect(card.get_by_role("button", name="Rotate External ID")).to_be_visible()
            _shot(page, tmp_path, "complete")
        except Exception:
            print(log_tail(server_log))
            raise
        finally:
            context.close()
            browser.close()
