"""The "Set Up New Connection" form: every bad input gets a field error and nothing is stored."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector, ConnectorStatus
from tests.web import post_form

GOOD = {
    "bucket": "acme-lineage",
    "prefix": "foundational/openlineage",
    "account_id": "210987654321",
    "role_name": "FoundationalOpenLineageExport",
    "interval_days": "14",
    "kms_key_arn": "",
    "role_path": "/",
    "permissions_boundary_arn": "",
}

BAD_INPUTS = [
    # bucket
    ("bucket", "", "Enter the S3 bucket name."),
    ("bucket", "Acme-Lineage", "no uppercase"),
    ("bucket", "s3://acme-lineage", "without s3://"),
    ("bucket", "S3://acme-lineage", "without s3://"),
    ("bucket", "arn:aws:s3:::acme-lineage", "without s3://"),
    ("bucket", "https://acme.s3.amazonaws.com", "without s3://"),
    ("bucket", "acme/lineage", "has no '/'"),
    ("bucket", "ab", "3 to 63"),
    ("bucket", "a" * 64, "3 to 63"),
    ("bucket", "192.168.5.4", "IP address"),
    ("bucket", "acme..lineage", "'..'"),
    ("bucket", "acme-lineage-", "starts and ends"),
    ("bucket", "-acme-lineage", "starts and ends"),
    ("bucket", "acme_lineage", "only lowercase"),
    ("bucket", "acme lineage", "only lowercase"),
    ("bucket", "acme.-lineage", "'.-'"),
    ("bucket", "xn--acme", "reserves"),
    ("bucket", "acme-s3alias", "reserves"),
    # prefix
    ("prefix", "a/../b", "'..'"),
    ("prefix", "../etc", "'..'"),
    ("prefix", "a/./b", "'.'"),
    ("prefix", "a//b", "'//'"),
    ("prefix", "a\tb", "control characters"),
    ("prefix", "a\nb", "control characters"),
    ("prefix", "a\x00b", "control characters"),
    ("prefix", "x" * 1025, "too long"),
    ("prefix", "exports/" + "a/" * 509, "too long"),
    ("prefix", "lignée", "not allowed"),
    ("prefix", "exports/*", "not allowed"),
    ("prefix", "exports/${aws:username}", "not allowed"),
    ("prefix", "a b", "not allowed"),
    ("prefix", "s3://acme-lineage/x", "without s3://"),
    # account id
    ("account_id", "", "exactly 12 digits"),
    ("account_id", "12345678901", "exactly 12 digits"),
    ("account_id", "1234567890123", "exactly 12 digits"),
    ("account_id", "12345678901a", "exactly 12 digits"),
    ("account_id", "acme", "exactly 12 digits"),
    ("account_id", "\u0661" * 12, "exactly 12 digits"),  # Arabic-Indic digits match a Unicode \\d
    # role name
    ("role_name", "", "Enter the IAM role name."),
    ("role_name", "role name", "only letters"),
    ("role_name", "role/name", "only letters"),
    ("role_name", "role*", "only letters"),
    ("role_name", "r" * 65, "at most 64"),
    # interval
    ("interval_days", "13", "at least 14"),
    ("interval_days", "0", "at least 14"),
    ("interval_days", "-1", "whole number"),
    ("interval_days", "fourteen", "whole number"),
    ("interval_days", "14.5", "whole number"),
    ("interval_days", "366", "at most 365"),
    ("interval_days", "\u0661\u0664", "whole number"),
    ("interval_days", "99999999999999999999", "whole number"),
    # advanced
    ("kms_key_arn", "alias/my-key", "full ARN"),
    ("kms_key_arn", "arn:aws:kms:us-east-1:123456789012:alias/x", "full ARN"),
    ("role_path", "/a b/", "role path"),
    ("role_path", "//", "role path"),
    ("permissions_boundary_arn", "arn:aws:iam::123:policy/x", "managed policy ARN"),
]


@pytest.fixture
def draft(admin_client: FlaskClient, db: Session) -> Connector:
    response = post_form(admin_client, "/integrations/openlineage/new", None, {})
    assert response.status_code == 302
    connector = db.scalars(select(Connector)).one()
    return connector


def test_the_table_has_at_least_40_cases() -> None:
    assert len(BAD_INPUTS) >= 40


@pytest.mark.parametrize(
    ("field", "value", "message"), BAD_INPUTS, ids=[f"{case[0]}-{n}" for n, case in enumerate(BAD_INPUTS)]
)
def test_bad_input_gives_a_field_error_and_stores_nothing(
    admin_client: FlaskClient, db: Session, draft: Connector, field: str, value: str, message: str
) -> None:
    url = f"/integrations/openlineage/{draft.id}/setup"
    response = post_form(admin_client, url, None, {**GOOD, field: value})
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert 'class="field has-error"' in html
    assert message.replace("'", "&#39;") in html or message in html, html[-3000:]
    db.expire_all()
    stored = db.get(Connector, draft.id)
    assert stored is not None
    assert (stored.bucket, stored.account_id, stored.role_name) == (None, None, None)
    assert stored.status is ConnectorStatus.DRAFT


def test_a_posted_external_id_is_refused_and_never_stored(
    admin_client: FlaskClient, db: Session, draft: Connector
) -> None:
    url = f"/integrations/openlineage/{draft.id}/setup"
    response = post_form(admin_client, url, None, {**GOOD, "external_id": "attacker-chosen-id"})
    assert response.status_code == 422
    assert "generated by Foundational and cannot be set" in response.get_data(as_text=True)
    db.expire_all()
    stored = db.get(Connector, draft.id)
    assert stored is not None and stored.external_id == draft.external_id
    assert stored.bucket is None


def test_good_input_is_normalised_and_stored(
    admin_client: FlaskClient, db: Session, draft: Connector
) -> None:
    url = f"/integrations/openlineage/{draft.id}/setup"
    response = post_form(
        admin_client,
        url,
        None,
        {
            **GOOD,
            "bucket": "  acme-lineage ",
            "prefix": "/foundational/openlineage/",
            "interval_days": "",
            "role_path": "integrations",
            "account_id": "2109-8765-4321",
        },
    )
    assert response.status_code == 302
    assert response.headers["Location"].endswith(f"/integrations/openlineage/{draft.id}/deploy")
    db.expire_all()
    stored = db.get(Connector, draft.id)
    assert stored is not None
    assert stored.bucket == "acme-lineage"
    assert stored.prefix == "foundational/openlineage"
    assert stored.interval_days == 14
    assert stored.role_path == "/integrations/"
    assert stored.account_id == "210987654321"
    assert stored.kms_key_arn is None and stored.permissions_boundary_arn is None


def test_the_form_shows_the_spec_labels_and_a_read_only_external_id(
    admin_client: FlaskClient, draft: Connector
) -> None:
    html = admin_client.get(f"/integrations/openlineage/{draft.id}/setup").get_data(as_text=True)
    for label in (
        "S3 Bucket Name",
        "Prefix (optional)",
        "AWS Account ID",
        "IAM Role Name",
        "External ID",
        "Export Interval (days)",
    ):
        assert label in html
    assert f'value="{draft.external_id}" readonly' in html
    assert 'name="external_id"' not in html
    assert 'value="14"' in html


def test_external_ids_are_long_random_and_unique(admin_client: FlaskClient, db: Session) -> None:
    for _ in range(5):
        post_form(admin_client, "/integrations/openlineage/new", None, {})
    ids = [c.external_id for c in db.scalars(select(Connector))]
    assert len(set(ids)) == 5
    for external_id in ids:
        # 32 URL-safe base64 characters after the prefix: 192 random bits.
        assert len(external_id) >= 36
