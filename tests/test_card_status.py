"""The connector's one status, the Integrations card, the card's live status, and Delete asking first."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

import portal
from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, Organization, RunStatus, utcnow
from tests.factories import make_connector, make_org, make_run, make_user
from tests.web import csrf_token_from, login

ACCOUNTS = "/integrations/openlineage"
TIME = "%Y-%m-%d %H:%M UTC"


def _text(html: str) -> str:
    """The page's text, roughly as a reader sees it: no tags (<wbr> included), spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html.replace("<wbr>", "")).split())


def _status(html: str, connector: Connector) -> str:
    card = html.split(f'id="connector-{connector.id}"', 1)[1]
    match = re.search(r'<p class="status status-(\w+)" data-field="label">([^<]*)</p>', card)
    assert match, card[:800]
    return f"{match.group(1)}: {match.group(2)}"


def _finished(
    db: Session, connector: Connector, status: RunStatus, minutes_ago: int, **values: object
) -> ExportRun:
    at = utcnow().replace(microsecond=0) - timedelta(minutes=minutes_ago)
    return make_run(db, connector, status, queued_at=at, started_at=at, finished_at=at, **values)


def test_a_failing_connector_is_not_shown_active(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    _finished(db, connector, RunStatus.SUCCEEDED, 300)
    first_failure = _finished(
        db, connector, RunStatus.FAILED, 200, error="Could not write to s3://x/: AccessDenied"
    )
    _finished(db, connector, RunStatus.FAILED, 100, error="Could not write to s3://x/: AccessDenied")
    html = admin_client.get(ACCOUNTS).get_data(as_text=True)
    assert first_failure.finished_at is not None
    assert _status(html, connector) == f"failing: Failing since {first_failure.finished_at.strftime(TIME)}"
    assert ">Active<" not in html


@pytest.mark.parametrize(
    ("status", "runs", "expected"),
    [
        (ConnectorStatus.ACTIVE, [RunStatus.SUCCEEDED], "healthy: Healthy"),
        (ConnectorStatus.ACTIVE, [], "waiting: No export yet"),
        (ConnectorStatus.ACTIVE, [RunStatus.SUCCEEDED, RunStatus.QUEUED], "queued: Export queued"),
        (ConnectorStatus.ACTIVE, [RunStatus.FAILED, RunStatus.RUNNING], "exporting: Exporting"),
        (ConnectorStatus.PAUSED, [RunStatus.FAILED], "paused: Paused"),
        (ConnectorStatus.DRAFT, [], "setup: Setup not finished"),
    ],
)
def test_one_status_word_per_state(
    admin_client: FlaskClient,
    db: Session,
    org: Organization,
    status: ConnectorStatus,
    runs: list[RunStatus],
    expected: str,
) -> None:
    connector = make_connector(db, org, status=status)
    for minutes, run_status in zip(range(len(runs), 0, -1), runs, strict=True):
        if run_status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            _finished(db, connector, run_status, minutes * 10)
        else:
            make_run(
                db, connector, run_status, started_at=utcnow() if run_status is RunStatus.RUNNING else None
            )
    assert _status(admin_client.get(ACCOUNTS).get_data(as_text=True), connector) == expected


def test_the_integrations_card_shows_each_accounts_last_export_and_its_error(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    good = make_connector(db, org, bucket="acme-good")
    bad = make_connector(db, org, bucket="acme-bad")
    make_connector(db, org, status=ConnectorStatus.DRAFT)  # a setup not finished, not an account
    succeeded = _finished(db, good, RunStatus.SUCCEEDED, 30)
    failed = _finished(db, bad, RunStatus.FAILED, 20, error="Could not write to s3://acme-bad/: AccessDenied")
    text = _text(admin_client.get("/integrations/").get_data(as_text=True))
    assert "2 accounts · 1 setup not finished" in text
    assert succeeded.finished_at is not None and failed.finished_at is not None
    assert (
        "s3://acme-good/foundational/openlineage Healthy "
        f"Last export: Succeeded at {succeeded.finished_at.strftime(TIME)}"
    ) in text
    assert (
        f"s3://acme-bad/foundational/openlineage Failing since {failed.finished_at.strftime(TIME)} "
        f"Last export: Failed at {failed.finished_at.strftime(TIME)} "
        "Could not write to s3://acme-bad/: AccessDenied"
    ) in text


def test_the_integrations_card_does_not_count_drafts_as_accounts(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    make_connector(db, org, status=ConnectorStatus.DRAFT)
    text = _text(admin_client.get("/integrations/").get_data(as_text=True))
    assert "Not connected · 1 setup not finished" in text
    assert "1 account" not in text


def test_live_status_follows_the_run(admin_client: FlaskClient, db: Session, org: Organization) -> None:
    connector = make_connector(db, org)
    run = make_run(db, connector, RunStatus.QUEUED)
    url = f"/integrations/openlineage/{connector.id}/status.json"
    page = admin_client.get(ACCOUNTS).get_data(as_text=True)
    assert f'data-status-url="{url}"' in page and 'data-polling="true"' in page
    assert '<script src="/static/card-status.js" defer></script>' in page

    body = admin_client.get(url).get_json()
    assert (body["state"], body["label"], body["now"], body["in_flight"]) == (
        "queued",
        "Export queued",
        "Export queued",
        True,
    )
    assert body["can_export_now"] is False

    run.status, run.started_at = RunStatus.RUNNING, utcnow()
    db.commit()
    assert admin_client.get(url).get_json()["label"] == "Exporting"

    run.status, run.finished_at = RunStatus.SUCCEEDED, utcnow()
    db.commit()
    response = admin_client.get(url)
    assert response.headers["Cache-Control"] == "no-store"
    body = response.get_json()
    assert (body["state"], body["last_status"], body["in_flight"], body["can_export_now"]) == (
        "healthy",
        "succeeded",
        False,
        True,
    )
    assert body["last_text"] == f"Succeeded at {run.finished_at.strftime(TIME)}"


def test_live_status_has_the_cards_login_and_tenant_isolation(
    app: Flask, client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    url = f"/integrations/openlineage/{connector.id}/status.json"
    response = client.get(url)
    assert response.status_code == 302 and response.headers["Location"].startswith("/login")

    make_user(db, make_org(db, "globex"), "admin@globex.test")
    login(client, "admin@globex.test")
    response = client.get(url)
    assert response.status_code == 404 and response.is_json


def test_delete_asks_first_and_says_what_is_lost(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    _finished(db, connector, RunStatus.SUCCEEDED, 10)
    card = admin_client.get(ACCOUNTS).get_data(as_text=True)
    # The card's Delete is a link to the confirmation, not a form that deletes.
    assert f'action="/integrations/openlineage/{connector.id}/delete"' not in card
    assert f'href="/integrations/openlineage/{connector.id}/delete"' in card

    page = admin_client.get(f"/integrations/openlineage/{connector.id}/delete")
    assert page.status_code == 200
    text = _text(page.get_data(as_text=True))
    assert "Delete this connection?" in text
    assert "stops every export to s3://acme-lineage/foundational/openlineage/" in text
    assert "its export history (1 export)" in text
    assert "the last export file, s3://acme-lineage/foundational/openlineage/openlineage-events.jsonl" in text
    assert db.get(Connector, connector.id) is not None  # asking deleted nothing

    token = csrf_token_from(page.get_data(as_text=True))
    response = admin_client.post(
        f"/integrations/openlineage/{connector.id}/delete", data={"csrf_token": token}
    )
    assert response.status_code == 302
    db.expire_all()
    assert db.scalars(select(Connector)).all() == []


def test_long_values_wrap_at_separators_and_the_policy_box_wraps_lines(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org, bucket="a-very-long-bucket-name-for-the-lineage-export-of-acme")
    card = admin_client.get(ACCOUNTS).get_data(as_text=True)
    assert "a-<wbr>very-<wbr>long-<wbr>bucket" in card
    assert (
        "arn:<wbr>aws:<wbr>iam:<wbr>:<wbr>210987654321:<wbr>role/<wbr>Foundational<wbr>Open<wbr>Lineage<wbr>Export"
        in card
    )
    read = admin_client.get(f"/integrations/openlineage/{connector.id}/read").get_data(as_text=True)
    assert '<pre id="reader-policy" class="mono wrap">' in read
    css = (Path(portal.__file__).parent / "static" / "screens.css").read_text()
    assert "pre.wrap { white-space: pre-wrap;" in css


def test_copy_buttons_for_the_external_id_and_the_reader_policy(
    admin_client: FlaskClient, db: Session, org: Organization
) -> None:
    connector = make_connector(db, org)
    for page, target in (("setup", "external_id"), ("deploy", "external-id"), ("read", "reader-policy")):
        html = admin_client.get(f"/integrations/openlineage/{connector.id}/{page}").get_data(as_text=True)
        assert f'class="copy" data-copy-target="{target}" hidden>' in html, page
        assert f'id="{target}"' in html
        assert '<script src="/static/copy.js" defer></script>' in html
