"""Write-check failures that moto cannot produce, through botocore's Stubber.

moto lets any role be assumed with any External ID (or none), and accepts SSE-KMS writes without
checking the key policy, so these paths are driven with real botocore clients whose responses are
stubbed with AWS's real error shapes. Everything moto *can* produce is tested against the moto server
in test_save_flow.py.
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from lineage_core.infra.aws import AssumedCredentials
from lineage_core.infra.config import Settings
from lineage_core.setup.destination import Destination
from lineage_core.setup.write_check import WriteCheckError, run_write_check

ROLE_ARN = "arn:aws:iam::210987654321:role/FoundationalOpenLineageExport"
DESTINATION = Destination(
    bucket="acme-lineage",
    prefix="foundational/openlineage",
    account_id="210987654321",
    role_arn=ROLE_ARN,
    external_id="olx-abcdefghijklmnopqrstuvwxyz012345",
)
SETTINGS = Settings(
    database_url="sqlite://",
    redis_url="redis://127.0.0.1:6379/0",
    secret_key="x" * 32,
    vendor_account_id="123456789012",
    aws_endpoint_url=None,
    aws_region="us-east-1",
    require_external_id_enforcement=True,
    export_queue="exports",
    local_mode=False,
)
CREDENTIALS = {
    "Credentials": {
        "AccessKeyId": "ASIAEXAMPLEEXAMPLE01",
        "SecretAccessKey": "secret-secret-secret-secret-secret-secret",
        "SessionToken": "token-token-token-token",
        "Expiration": datetime.now(UTC) + timedelta(hours=1),
    }
}
PROBE_KEY = "foundational/openlineage/.foundational-export-writecheck"


class StubbedClients:
    """The AwsClients protocol with real botocore clients (no network) answered by Stubbers."""

    def __init__(self) -> None:
        keys = {"region_name": "us-east-1", "aws_access_key_id": "a", "aws_secret_access_key": "b"}
        self.sts_client = boto3.client("sts", **keys)
        self.s3_client = boto3.client("s3", **keys)
        self.sts_stub = Stubber(self.sts_client)
        self.s3_stub = Stubber(self.s3_client)
        self.s3_regions: list[str] = []

    def sts(self) -> Any:
        return self.sts_client

    def s3(self, credentials: AssumedCredentials, region: str) -> Any:
        self.s3_regions.append(region)
        return self.s3_client


@pytest.fixture
def stubs(monkeypatch: pytest.MonkeyPatch) -> Any:
    # A fixed probe body, so the stubbed GetObject can return exactly what was written.
    monkeypatch.setattr("lineage_core.setup.write_check.secrets.token_hex", lambda _n: "f" * 32)
    clients = StubbedClients()
    with clients.sts_stub, clients.s3_stub:
        yield clients


PROBE_BODY = b"write check " + b"f" * 32 + b"\n"


def _assume_ok(stub: Stubber, external_id: str | None) -> None:
    params: dict[str, Any] = {"RoleArn": ROLE_ARN, "RoleSessionName": ANY, "DurationSeconds": 3600}
    if external_id:
        params["ExternalId"] = external_id
    stub.add_response("assume_role", CREDENTIALS, params)


def _assume_denied(stub: Stubber) -> None:
    stub.add_client_error(
        "assume_role",
        service_error_code="AccessDenied",
        service_message=f"User: arn:aws:iam::123456789012:user/exporter is not authorized to perform: "
        f"sts:AssumeRole on resource: {ROLE_ARN}",
        http_status_code=403,
    )


def _body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


def test_unconditional_trust_is_refused(stubs: Any) -> None:
    _assume_ok(stubs.sts_stub, DESTINATION.external_id)
    _assume_ok(stubs.sts_stub, None)  # the role also lets us in without the External ID
    with pytest.raises(WriteCheckError) as info:
        run_write_check(SETTINGS, DESTINATION, stubs)
    message = str(info.value)
    assert message.startswith(f"Could not assume the trust role {ROLE_ARN} safely")
    assert "can be assumed without the External ID" in message
    stubs.sts_stub.assert_no_pending_responses()


def test_wrong_external_id_or_missing_role(stubs: Any) -> None:
    _assume_denied(stubs.sts_stub)
    with pytest.raises(WriteCheckError) as info:
        run_write_check(SETTINGS, DESTINATION, stubs)
    message = str(info.value)
    assert message.startswith(f"Could not assume the trust role {ROLE_ARN}: AccessDenied")
    assert "account 210987654321" in message
    assert "IAM Role Name and External ID" in message


def test_enforced_external_id_passes_and_the_bucket_region_is_used(stubs: Any) -> None:
    _assume_ok(stubs.sts_stub, DESTINATION.external_id)
    _assume_denied(stubs.sts_stub)  # without the External ID: denied, as it should be
    s3 = stubs.s3_stub
    where = {"Bucket": "acme-lineage", "Key": PROBE_KEY}
    s3.add_response("get_bucket_location", {"LocationConstraint": "eu-west-1"}, {"Bucket": "acme-lineage"})
    s3.add_response("put_object", {"ETag": '"x"'}, {**where, "Body": PROBE_BODY})
    s3.add_response("get_object", {"Body": _body(PROBE_BODY)}, where)
    s3.add_response("create_multipart_upload", {"UploadId": "u1"}, where)
    s3.add_response("abort_multipart_upload", {}, {**where, "UploadId": "u1"})
    s3.add_response("delete_object", {}, where)
    result = run_write_check(SETTINGS, DESTINATION, stubs)
    assert result.role_arn == ROLE_ARN
    assert result.bucket_region == "eu-west-1"
    assert stubs.s3_regions == ["us-east-1", "eu-west-1"]
    s3.assert_no_pending_responses()
    stubs.sts_stub.assert_no_pending_responses()


def test_kms_denied_on_put_names_the_key_permission(stubs: Any) -> None:
    destination = replace(DESTINATION, kms_key_arn="arn:aws:kms:us-east-1:210987654321:key/1234abcd-12ab")
    _assume_ok(stubs.sts_stub, destination.external_id)
    _assume_denied(stubs.sts_stub)
    stubs.s3_stub.add_response("get_bucket_location", {}, {"Bucket": "acme-lineage"})
    stubs.s3_stub.add_client_error(
        "put_object",
        service_error_code="AccessDenied",
        service_message="User is not authorized to perform: kms:GenerateDataKey on the key",
        http_status_code=403,
        expected_params={
            "Bucket": "acme-lineage",
            "Key": PROBE_KEY,
            "Body": ANY,
            "ServerSideEncryption": "aws:kms",
            "SSEKMSKeyId": destination.kms_key_arn,
        },
    )
    stubs.s3_stub.add_response("delete_object", {}, {"Bucket": "acme-lineage", "Key": PROBE_KEY})
    with pytest.raises(WriteCheckError) as info:
        run_write_check(SETTINGS, destination, stubs)
    message = str(info.value)
    assert message.startswith(
        "Could not write to s3://acme-lineage/foundational/openlineage/.foundational-export-writecheck"
    )
    assert "PutObject failed, AccessDenied" in message
    assert "kms:GenerateDataKey, kms:Decrypt" in message


def test_delete_denied_is_reported_after_a_successful_write(stubs: Any) -> None:
    _assume_ok(stubs.sts_stub, DESTINATION.external_id)
    _assume_denied(stubs.sts_stub)
    s3 = stubs.s3_stub
    s3.add_response("get_bucket_location", {"LocationConstraint": "us-east-1"}, {"Bucket": "acme-lineage"})
    s3.add_response("put_object", {"ETag": '"x"'}, None)
    s3.add_response("get_object", {"Body": _body(PROBE_BODY)}, None)
    s3.add_response("create_multipart_upload", {"UploadId": "u1"}, None)
    s3.add_response("abort_multipart_upload", {}, None)
    s3.add_client_error(
        "delete_object",
        service_error_code="AccessDenied",
        service_message="Access Denied",
        http_status_code=403,
    )
    with pytest.raises(WriteCheckError) as info:
        run_write_check(SETTINGS, DESTINATION, stubs)
    assert "DeleteObject failed, AccessDenied" in str(info.value)
    assert "s3:DeleteObject is needed" in str(info.value)


def test_a_read_back_that_differs_is_refused_and_the_probe_removed(stubs: Any) -> None:
    _assume_ok(stubs.sts_stub, DESTINATION.external_id)
    _assume_denied(stubs.sts_stub)
    s3 = stubs.s3_stub
    s3.add_response("get_bucket_location", {"LocationConstraint": "us-east-1"}, {"Bucket": "acme-lineage"})
    s3.add_response("put_object", {"ETag": '"x"'}, None)
    s3.add_response("get_object", {"Body": _body(b"something else")}, None)
    s3.add_response("delete_object", {}, {"Bucket": "acme-lineage", "Key": PROBE_KEY})
    with pytest.raises(WriteCheckError, match="differs from the one written"):
        run_write_check(SETTINGS, DESTINATION, stubs)
    s3.assert_no_pending_responses()


def test_throttled_confirmation_asks_to_retry_rather_than_passing(stubs: Any) -> None:
    _assume_ok(stubs.sts_stub, DESTINATION.external_id)
    stubs.sts_stub.add_client_error(
        "assume_role", service_error_code="Throttling", service_message="Rate exceeded", http_status_code=400
    )
    with pytest.raises(WriteCheckError, match="confirm that it requires the External ID: Throttling"):
        run_write_check(SETTINGS, DESTINATION, stubs)


def test_credentials_never_show_their_secret() -> None:
    creds = AssumedCredentials("ASIAEXAMPLE", "very-secret-value", "session-token-value")
    assert "very-secret" not in repr(creds) and "session-token" not in repr(creds)
