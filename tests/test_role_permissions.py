"""What the customer role may do: the exact intended policies, and what S3 allows with them.

``expected_policies`` is the contract both the CloudFormation template and the Terraform module are
tested against, so it is pinned here as literal JSON. The enforcement tests switch on moto's IAM
checks and use the credentials Foundational would get from ``sts.assume_role``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from lineage_core.setup import destination
from lineage_core.setup.cloudformation import (
    KMS_POLICY_NAME,
    S3_POLICY_NAME,
    expected_policies,
    render_template,
)
from lineage_core.setup.role_spec import RoleSpec
from tests.services import VENDOR_ACCOUNT_ID

CUSTOMER_ACCOUNT_ID = "111122223333"
EXTERNAL_ID = "olx-3q2PZk0Vt0sX8jv6kYb1rNQe7u5wH9cD"
KMS_KEY_ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
OTHER_BUCKET = "acme-other-bucket"


def make_spec(**changes: Any) -> RoleSpec:
    values: dict[str, Any] = {
        "vendor_account_id": VENDOR_ACCOUNT_ID,
        "external_id": EXTERNAL_ID,
        "role_name": "FoundationalOpenLineageExport",
        "role_path": "/",
        "bucket": "acme-lineage",
        "prefix": "a/b",
        "customer_account_id": CUSTOMER_ACCOUNT_ID,
    }
    return RoleSpec(**{**values, **changes})


# --- The contract, as literal JSON -------------------------------------------------------------------


def test_expected_policies_with_a_prefix_and_a_kms_key() -> None:
    policies = expected_policies(make_spec(kms_key_arn=KMS_KEY_ARN))
    assert policies == json.loads(
        """
        {
          "trust_policy": {
            "Version": "2012-10-17",
            "Statement": [{
              "Sid": "TrustVendorWithExternalId",
              "Effect": "Allow",
              "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
              "Action": "sts:AssumeRole",
              "Condition": {"StringEquals": {"sts:ExternalId": "olx-3q2PZk0Vt0sX8jv6kYb1rNQe7u5wH9cD"}}
            }]
          },
          "inline_policies": {
            "openlineage-export-s3": {
              "Version": "2012-10-17",
              "Statement": [
                {
                  "Sid": "ListExportPrefix",
                  "Effect": "Allow",
                  "Action": "s3:ListBucket",
                  "Resource": "arn:aws:s3:::acme-lineage",
                  "Condition": {"StringLike": {"s3:prefix": ["a/b", "a/b/*"]}}
                },
                {
                  "Sid": "LocateBucket",
                  "Effect": "Allow",
                  "Action": "s3:GetBucketLocation",
                  "Resource": "arn:aws:s3:::acme-lineage"
                },
                {
                  "Sid": "ReadWriteExportObjects",
                  "Effect": "Allow",
                  "Action": ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject",
                             "s3:PutObjectTagging"],
                  "Resource": "arn:aws:s3:::acme-lineage/a/b/*"
                }
              ]
            },
            "openlineage-export-kms": {
              "Version": "2012-10-17",
              "Statement": [{
                "Sid": "UseExportKmsKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                "Resource": "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
              }]
            }
          }
        }
        """
    )


def test_expected_policies_at_the_bucket_root_without_kms_in_china() -> None:
    policies = expected_policies(make_spec(prefix=""), partition="aws-cn")
    assert policies == json.loads(
        """
        {
          "trust_policy": {
            "Version": "2012-10-17",
            "Statement": [{
              "Sid": "TrustVendorWithExternalId",
              "Effect": "Allow",
              "Principal": {"AWS": "arn:aws-cn:iam::123456789012:root"},
              "Action": "sts:AssumeRole",
              "Condition": {"StringEquals": {"sts:ExternalId": "olx-3q2PZk0Vt0sX8jv6kYb1rNQe7u5wH9cD"}}
            }]
          },
          "inline_policies": {
            "openlineage-export-s3": {
              "Version": "2012-10-17",
              "Statement": [
                {
                  "Sid": "ListExportPrefix",
                  "Effect": "Allow",
                  "Action": "s3:ListBucket",
                  "Resource": "arn:aws-cn:s3:::acme-lineage"
                },
                {
                  "Sid": "LocateBucket",
                  "Effect": "Allow",
                  "Action": "s3:GetBucketLocation",
                  "Resource": "arn:aws-cn:s3:::acme-lineage"
                },
                {
                  "Sid": "ReadWriteExportObjects",
                  "Effect": "Allow",
                  "Action": ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject",
                             "s3:PutObjectTagging"],
                  "Resource": "arn:aws-cn:s3:::acme-lineage/*"
                }
              ]
            }
          }
        }
        """
    )


@pytest.mark.parametrize(
    "spec",
    [
        make_spec(),
        make_spec(prefix=""),
        make_spec(prefix="x/y/z", kms_key_arn=KMS_KEY_ARN),
        make_spec(role_path="/integrations/", permissions_boundary_arn="arn:aws:iam::aws:policy/Boundary"),
    ],
    ids=["prefix", "root", "nested-with-kms", "path-and-boundary"],
)
def test_expected_policies_grant_nothing_beyond_the_export(spec: RoleSpec) -> None:
    policies = expected_policies(spec)
    statements = [s for document in policies["inline_policies"].values() for s in document["Statement"]]
    actions = [
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    allowed = {"s3:ListBucket", "s3:GetBucketLocation", "s3:AbortMultipartUpload", "s3:DeleteObject"}
    allowed |= {"s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "kms:Decrypt", "kms:GenerateDataKey"}
    assert set(actions) <= allowed and len(actions) == len(set(actions))
    assert all(s["Effect"] == "Allow" and "NotAction" not in s and "NotResource" not in s for s in statements)
    # The only wildcard is the one that means "objects under the prefix".
    resources = [s["Resource"] for s in statements]
    assert all(isinstance(resource, str) for resource in resources)
    objects = f"arn:aws:s3:::{spec.bucket}/{destination.object_key(spec.prefix, '*')}"
    assert [resource for resource in resources if "*" in resource] == [objects]
    # A role that could be assumed without the External ID is the confused deputy AWS warns about.
    (trust,) = policies["trust_policy"]["Statement"]
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": spec.external_id}}
    assert trust["Principal"] == {"AWS": f"arn:aws:iam::{spec.vendor_account_id}:root"}
    assert (KMS_POLICY_NAME in policies["inline_policies"]) == bool(spec.kms_key_arn)
    assert next(iter(policies["inline_policies"])) == S3_POLICY_NAME


# --- With moto's IAM enforcement on ------------------------------------------------------------------


def _client(endpoint: str, service: str, account: str | None = None, **credentials: Any) -> Any:
    client = boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", **credentials)
    if account is not None:
        # moto keeps one state per account and picks it from this header.
        def add_account_header(request: Any, **_: Any) -> None:
            request.headers["x-moto-account-id"] = account

        client.meta.events.register("before-sign", add_account_header)
    return client


def _create_role_through_iam(endpoint: str, spec: RoleSpec) -> str:
    """The role, made with the IAM API from exactly the documents ``expected_policies(spec)`` returns.

    TEST-SERVICES.md records that with enforcement on, S3 calls made with the credentials of a role
    created by CloudFormation fail with HTTP 500 in moto. (Measured here: that happens for policies in
    the Role's ``Policies`` list, which moto stores unserialised; our template uses AWS::IAM::Policy
    resources and does not hit it, hence the second variant below.) These are the documents the
    deploy tests in test_cloudformation_template.py proved the stack creates.
    """
    policies = expected_policies(spec)
    iam = _client(endpoint, "iam", CUSTOMER_ACCOUNT_ID)
    role = iam.create_role(
        RoleName=spec.role_name,
        Path=spec.role_path,
        AssumeRolePolicyDocument=json.dumps(policies["trust_policy"]),
        MaxSessionDuration=3600,
    )["Role"]
    for name, document in policies["inline_policies"].items():
        iam.put_role_policy(RoleName=spec.role_name, PolicyName=name, PolicyDocument=json.dumps(document))
    return str(role["Arn"])


def _create_role_through_stack(endpoint: str, spec: RoleSpec) -> str:
    cloudformation = _client(endpoint, "cloudformation", CUSTOMER_ACCOUNT_ID)
    cloudformation.create_stack(
        StackName="FoundationalOpenLineageExport",
        TemplateBody=render_template(spec),
        Capabilities=["CAPABILITY_NAMED_IAM"],
    )
    stack = cloudformation.describe_stacks(StackName="FoundationalOpenLineageExport")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    return next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "RoleArn")


ROLE_MAKERS: dict[str, Callable[[str, RoleSpec], str]] = {
    "iam-api": _create_role_through_iam,
    "cloudformation-stack": _create_role_through_stack,
}


def _assumed_role_s3(endpoint: str, spec: RoleSpec, make_role: Callable[[str, RoleSpec], str]) -> Any:
    """Set everything up with enforcement off, switch it on, and return S3 as Foundational sees it.

    The vendor side is an IAM user in the vendor account allowed only sts:AssumeRole on this role;
    the role and buckets live in the customer account, as in production.
    """
    customer_s3 = _client(endpoint, "s3", CUSTOMER_ACCOUNT_ID)
    for bucket in (spec.bucket, OTHER_BUCKET):
        customer_s3.create_bucket(Bucket=bucket)
        customer_s3.put_object(Bucket=bucket, Key="outside/keep.txt", Body=b"customer data")
    role_arn = make_role(endpoint, spec)
    assert role_arn == destination.role_arn("aws", CUSTOMER_ACCOUNT_ID, spec.role_path, spec.role_name)

    vendor_iam = _client(endpoint, "iam")
    vendor_iam.create_user(UserName="foundational-exporter")
    vendor_iam.put_user_policy(
        UserName="foundational-exporter",
        PolicyName="assume-customer-roles",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": role_arn}],
            }
        ),
    )
    key = vendor_iam.create_access_key(UserName="foundational-exporter")["AccessKey"]

    response = requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=10)
    assert response.ok
    vendor_sts = _client(
        endpoint,
        "sts",
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
        aws_session_token=None,
    )
    # moto does not evaluate a cross-account trust policy (the trust document itself is compared in
    # the deploy tests); it does enforce the vendor user's own sts:AssumeRole permission.
    credentials = vendor_sts.assume_role(
        RoleArn=role_arn, RoleSessionName="foundational-openlineage-export", ExternalId=spec.external_id
    )["Credentials"]
    return _client(
        endpoint,
        "s3",
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )


def _assert_access_denied(call: Callable[[], Any]) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == "AccessDenied", caught.value.response


def _multipart_upload(s3: Any, bucket: str, key: str, body: bytes) -> None:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=body)["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )


@pytest.mark.parametrize("role_source", sorted(ROLE_MAKERS))
def test_assumed_role_can_only_touch_objects_under_the_prefix(aws: str, role_source: str) -> None:
    spec = make_spec(prefix="a/b")
    s3 = _assumed_role_s3(aws, spec, ROLE_MAKERS[role_source])

    # What the write check and the export do.
    probe = destination.probe_key(spec.prefix)
    s3.put_object(Bucket=spec.bucket, Key=probe, Body=b"probe")
    assert s3.get_object(Bucket=spec.bucket, Key=probe)["Body"].read() == b"probe"
    s3.delete_object(Bucket=spec.bucket, Key=probe)
    _multipart_upload(s3, spec.bucket, destination.export_key(spec.prefix), b'{"eventType":"COMPLETE"}\n')
    s3.put_object_tagging(
        Bucket=spec.bucket,
        Key=destination.export_key(spec.prefix),
        Tagging={"TagSet": [{"Key": "event-count", "Value": "1"}]},
    )
    aborted = s3.create_multipart_upload(Bucket=spec.bucket, Key=destination.export_key(spec.prefix))
    s3.abort_multipart_upload(Bucket=spec.bucket, Key=aborted["Key"], UploadId=aborted["UploadId"])
    s3.get_bucket_location(Bucket=spec.bucket)
    listed = s3.list_objects_v2(Bucket=spec.bucket, Prefix=f"{spec.prefix}/")
    assert [o["Key"] for o in listed["Contents"]] == [destination.export_key(spec.prefix)]
    # (moto ignores the s3:prefix condition on ListBucket, so listing elsewhere can't be tested here;
    # the condition is pinned by the policy-equality tests.)

    for key in ("probe", "a/bc/x", "a/b", "a/probe", "b/a/b/x", "outside/keep.txt"):
        _assert_access_denied(lambda key=key: s3.put_object(Bucket=spec.bucket, Key=key, Body=b"x"))
    _assert_access_denied(lambda: s3.create_multipart_upload(Bucket=spec.bucket, Key="a/bc/events.jsonl"))
    _assert_access_denied(lambda: s3.get_object(Bucket=spec.bucket, Key="outside/keep.txt"))
    _assert_access_denied(lambda: s3.delete_object(Bucket=spec.bucket, Key="outside/keep.txt"))
    _assert_access_denied(
        lambda: s3.put_object_tagging(
            Bucket=spec.bucket, Key="outside/keep.txt", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}
        )
    )
    _assert_other_bucket_is_out_of_reach(s3, spec)


@pytest.mark.parametrize("role_source", sorted(ROLE_MAKERS))
def test_assumed_role_with_an_empty_prefix_owns_the_bucket_but_nothing_else(
    aws: str, role_source: str
) -> None:
    spec = make_spec(prefix="")
    s3 = _assumed_role_s3(aws, spec, ROLE_MAKERS[role_source])

    for key in (destination.probe_key(""), "any/where/x"):
        s3.put_object(Bucket=spec.bucket, Key=key, Body=b"probe")
        assert s3.get_object(Bucket=spec.bucket, Key=key)["Body"].read() == b"probe"
        s3.delete_object(Bucket=spec.bucket, Key=key)
    _multipart_upload(s3, spec.bucket, destination.export_key(""), b"{}\n")
    s3.get_bucket_location(Bucket=spec.bucket)
    assert "Contents" in s3.list_objects_v2(Bucket=spec.bucket)
    _assert_other_bucket_is_out_of_reach(s3, spec)


def _assert_other_bucket_is_out_of_reach(s3: Any, spec: RoleSpec) -> None:
    key = destination.export_key(spec.prefix)
    _assert_access_denied(lambda: s3.put_object(Bucket=OTHER_BUCKET, Key=key, Body=b"x"))
    _assert_access_denied(lambda: s3.get_object(Bucket=OTHER_BUCKET, Key="outside/keep.txt"))
    _assert_access_denied(lambda: s3.delete_object(Bucket=OTHER_BUCKET, Key="outside/keep.txt"))
    _assert_access_denied(lambda: s3.list_objects_v2(Bucket=OTHER_BUCKET))
    _assert_access_denied(lambda: s3.get_bucket_location(Bucket=OTHER_BUCKET))
    _assert_access_denied(lambda: s3.list_buckets())
