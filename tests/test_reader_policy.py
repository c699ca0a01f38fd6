"""The "Read the export" policy, enforced by moto's IAM: a reader gets the export and nothing more."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from lineage_core.setup.reader_policy import reader_policy
from tests.services import s3_client

BUCKET = "acme-lineage"
PREFIX = "foundational/openlineage"


def _reader_s3(endpoint: str, policy: dict[str, Any]) -> Any:
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    iam.create_role(RoleName="catalog-reader", AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(
        RoleName="catalog-reader", PolicyName="read-export", PolicyDocument=json.dumps(policy)
    )
    # Enforcement from the request after next: moto refuses AssumeRole under enforcement (measured),
    # so the assume runs unchecked and every S3 call after it is checked against the reader's policy.
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"1", timeout=10)
    creds = boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1").assume_role(
        RoleArn="arn:aws:iam::123456789012:role/catalog-reader", RoleSessionName="reader"
    )["Credentials"]
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )


def _denied(call: Any) -> bool:
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"] == "AccessDenied"
    return False


@pytest.mark.parametrize("prefix", [PREFIX, ""], ids=["prefix", "bucket-root"])
def test_the_reader_can_read_the_export_and_nothing_else(aws: str, prefix: str) -> None:
    admin = s3_client(aws)
    admin.create_bucket(Bucket=BUCKET)
    admin.create_bucket(Bucket="other-bucket")
    export_key = f"{prefix}/openlineage-events.jsonl" if prefix else "openlineage-events.jsonl"
    admin.put_object(Bucket=BUCKET, Key=export_key, Body=b'{"eventType":"COMPLETE"}\n')
    admin.put_object(Bucket=BUCKET, Key="private/secrets.csv", Body=b"x")
    admin.put_object(Bucket="other-bucket", Key="openlineage-events.jsonl", Body=b"x")

    s3 = _reader_s3(aws, reader_policy(BUCKET, prefix))
    assert s3.get_object(Bucket=BUCKET, Key=export_key)["Body"].read() == b'{"eventType":"COMPLETE"}\n'
    assert s3.get_bucket_location(Bucket=BUCKET)["LocationConstraint"] in (None, "")
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/" if prefix else "")
    assert export_key in [obj["Key"] for obj in listed["Contents"]]

    assert _denied(lambda: s3.put_object(Bucket=BUCKET, Key=export_key, Body=b"tampered"))
    assert _denied(lambda: s3.delete_object(Bucket=BUCKET, Key=export_key))
    assert _denied(lambda: s3.get_object(Bucket=BUCKET, Key="private/secrets.csv"))
    assert _denied(lambda: s3.get_object(Bucket="other-bucket", Key="openlineage-events.jsonl"))


def test_the_reader_can_check_the_export_without_downloading_it(aws: str) -> None:
    admin = s3_client(aws)
    admin.create_bucket(Bucket=BUCKET)
    export_key = f"{PREFIX}/openlineage-events.jsonl"
    admin.put_object(
        Bucket=BUCKET,
        Key=export_key,
        Body=b'{"eventType":"COMPLETE"}\n',
        ChecksumAlgorithm="CRC64NVME",
        Tagging="event-count=1",
    )
    admin.put_object(Bucket=BUCKET, Key="private/secrets.csv", Body=b"x", Tagging="owner=finance")

    s3 = _reader_s3(aws, reader_policy(BUCKET, PREFIX))
    tags = s3.get_object_tagging(Bucket=BUCKET, Key=export_key)["TagSet"]
    assert {"Key": "event-count", "Value": "1"} in tags
    attributes = s3.get_object_attributes(
        Bucket=BUCKET, Key=export_key, ObjectAttributes=["Checksum", "ObjectSize"]
    )
    assert attributes["Checksum"]["ChecksumCRC64NVME"]
    assert attributes["ObjectSize"] == len(b'{"eventType":"COMPLETE"}\n')

    # Read-only: the reader can neither change the tags nor look at other objects' tags.
    assert _denied(
        lambda: s3.put_object_tagging(
            Bucket=BUCKET, Key=export_key, Tagging={"TagSet": [{"Key": "event-count", "Value": "9"}]}
        )
    )
    assert _denied(lambda: s3.get_object_tagging(Bucket=BUCKET, Key="private/secrets.csv"))
