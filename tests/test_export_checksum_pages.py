"""The checksum on the card and the History page, and "Read the export" telling how to check the file and
how to learn that a new one landed."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from lineage_core.export import checksum
from lineage_core.export.reader_guide import LOCAL_CRC64NVME_SCRIPT, reader_guide
from lineage_core.infra.models import Connector, Organization, RunStatus, utcnow
from tests.factories import make_connector, make_org, make_run

CHECKSUM = "0FUE1Nd4iNA="
NO_TAG = (
    "The file is in place and its checksum verified, but its event-count tag is not set: the role does "
    "not allow s3:PutObjectTagging. Update the CloudFormation stack (or Terraform module) with the "
    "current template to allow it."
)


@pytest.fixture
def active(db: Session, org: Organization) -> Connector:
    return make_connector(db, org, bucket_region="eu-west-1", verified_at=utcnow())


def _succeeded(db: Session, connector: Connector, minutes_ago: int, **values: object) -> None:
    at = utcnow() - timedelta(minutes=minutes_ago)
    make_run(
        db,
        connector,
        RunStatus.SUCCEEDED,
        queued_at=at,
        started_at=at,
        finished_at=at + timedelta(seconds=3),
        events=12,
        bytes=3456,
        **values,
    )


def test_card_shows_the_last_exports_checksum(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    _succeeded(db, active, 10, checksum_crc64nvme="AAAAAAAAAAA=")
    _succeeded(db, active, 0, checksum_crc64nvme=CHECKSUM)

    page = admin_client.get("/integrations/openlineage").get_data(as_text=True)
    assert f'data-field="checksum_note">Checksum (CRC64NVME): {CHECKSUM}</p>' in page
    status = admin_client.get(f"/integrations/openlineage/{active.id}/status.json").get_json()
    assert status["checksum_note"] == f"Checksum (CRC64NVME): {CHECKSUM}"


def test_card_says_why_the_event_count_tag_is_missing(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    _succeeded(db, active, 0, checksum_crc64nvme=CHECKSUM, tagging_error=NO_TAG)

    page = html.unescape(admin_client.get("/integrations/openlineage").get_data(as_text=True))
    assert f"Checksum (CRC64NVME): {CHECKSUM}. {NO_TAG}" in page


def test_card_has_no_checksum_after_a_failed_export(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    _succeeded(db, active, 10, checksum_crc64nvme=CHECKSUM)
    make_run(db, active, RunStatus.FAILED, finished_at=utcnow(), error="Could not write.")

    status = admin_client.get(f"/integrations/openlineage/{active.id}/status.json").get_json()
    assert status["checksum_note"] == ""


def test_history_shows_each_exports_checksum(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    _succeeded(db, active, 20)  # recorded before checksums were kept
    _succeeded(db, active, 10, checksum_crc64nvme="AAAAAAAAAAA=", tagging_error=NO_TAG)
    _succeeded(db, active, 0, checksum_crc64nvme=CHECKSUM)

    page = admin_client.get(f"/integrations/openlineage/{active.id}/history").get_data(as_text=True)
    cells = re.findall(r'<td class="checksum"><span class="mono">(.*?)</span>(.*?)</td>', page)
    assert [(value, html.unescape(re.sub(r"<[^>]+>", "", note))) for value, note in cells] == [
        (CHECKSUM, ""),
        ("AAAAAAAAAAA=", NO_TAG),
        ("—", ""),
    ]


def test_history_shows_no_other_organizations_checksum(
    admin_client: FlaskClient, db: Session, active: Connector
) -> None:
    other = make_connector(db, make_org(db, "other-org"), bucket="other-bucket", verified_at=utcnow())
    _succeeded(db, other, 0, checksum_crc64nvme=CHECKSUM)

    assert admin_client.get(f"/integrations/openlineage/{other.id}/history").status_code == 404
    page = admin_client.get(f"/integrations/openlineage/{active.id}/history").get_data(as_text=True)
    assert CHECKSUM not in page


def test_read_the_export_says_how_to_check_the_file_and_to_learn_of_a_new_one(
    admin_client: FlaskClient, active: Connector
) -> None:
    page = html.unescape(
        admin_client.get(f"/integrations/openlineage/{active.id}/read").get_data(as_text=True)
    )

    key = "foundational/openlineage/openlineage-events.jsonl"
    where = f"--bucket acme-lineage --key {key}"
    assert f"aws s3api head-object {where} --checksum-mode ENABLED" in page
    assert f"aws s3api get-object-attributes {where} --object-attributes Checksum ObjectSize ETag" in page
    assert f"aws s3api get-object-tagging {where}" in page
    assert "crc = crc64nvme(block, crc)" in page
    notification = json.loads(re.search(r'<pre id="read-notification"[^>]*>(.*?)</pre>', page, re.S)[1])
    (queue,) = notification["QueueConfigurations"]
    assert queue["Events"] == ["s3:ObjectCreated:*"]
    assert queue["Filter"]["Key"]["FilterRules"] == [
        {"Name": "prefix", "Value": key},
        {"Name": "suffix", "Value": "openlineage-events.jsonl"},
    ]
    pattern = json.loads(re.search(r'<pre id="read-eventbridge"[^>]*>(.*?)</pre>', page, re.S)[1])
    assert pattern == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": ["acme-lineage"]}, "object": {"key": [key]}},
    }


def test_the_guide_at_the_bucket_root_filters_on_the_file_name() -> None:
    guide = reader_guide("acme-lineage", "")

    assert guide.key == "openlineage-events.jsonl"
    rules = guide.notification_configuration["QueueConfigurations"][0]["Filter"]["Key"]["FilterRules"]
    assert rules == [
        {"Name": "prefix", "Value": "openlineage-events.jsonl"},
        {"Name": "suffix", "Value": "openlineage-events.jsonl"},
    ]
    assert guide.eventbridge_pattern["detail"]["object"] == {"key": ["openlineage-events.jsonl"]}


def test_the_local_checksum_script_computes_what_s3_reports(tmp_path: Path) -> None:
    """The script the page shows, run on a file: the same value as the product's own CRC64NVME."""
    data = b'{"eventType":"COMPLETE"}\n' * 100_000  # several 1 MiB blocks
    path = tmp_path / "openlineage-events.jsonl"
    path.write_bytes(data)
    printed = subprocess.run(
        [sys.executable, "-c", LOCAL_CRC64NVME_SCRIPT, str(path)], capture_output=True, check=True, text=True
    ).stdout
    assert printed.strip() == checksum.encoded_crc(data)
