"""The write check that Save runs before a connector becomes active (spec, Part 3).

It does what an export will do, with the customer's role and nothing more: assume the role with the
External ID, find the bucket's region, write the probe object under the prefix (with the KMS key when
one is configured), read it back, open and abort a multipart upload (the export streams through one),
and delete the probe. Every failure becomes a :class:`WriteCheckError` whose message starts with the
spec's words and then says what went wrong and what to check.
"""

from __future__ import annotations

import secrets
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.infra import aws
from lineage_core.infra.aws_errors import describe_aws_error, error_code
from lineage_core.infra.config import Settings
from lineage_core.setup.advice import WRITE_ADVICE, write_advice
from lineage_core.setup.destination import Destination, probe_key, s3_url

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client
    from types_boto3_sts import STSClient

_TRUST_ADVICE = (
    "Check that the stack was created in AWS account {account} from the downloaded template, "
    "and that the AWS Account ID, IAM Role Name and External ID match it."
)


@dataclass(frozen=True)
class WriteCheckResult:
    role_arn: str
    bucket_region: str


class WriteCheckError(Exception):
    """The check failed; ``str(error)`` is the message for the admin."""


def run_write_check(
    settings: Settings, destination: Destination, clients: aws.AwsClients | None = None
) -> WriteCheckResult:
    """Prove we can write the export with this destination's role.

    Raises:
        WriteCheckError: any step failed; nothing is left behind in the bucket that we could delete.
    """
    clients = clients or aws.LiveAwsClients(settings)
    arn = destination.role_arn
    if settings.local_mode:
        # The local demo only: its AWS endpoint lets anyone assume any role, so ask its IAM first what
        # real STS would refuse. Production (LOCAL_MODE off) never takes this branch.
        _refuse_what_sts_would_refuse_locally(settings, destination)
    sts = clients.sts()
    credentials = _assume(settings, sts, arn, destination)
    if settings.require_external_id_enforcement:
        _refuse_unconditional_trust(settings, sts, arn)

    s3 = clients.s3(credentials, settings.aws_region)
    region = _bucket_region(s3, destination)
    if region != settings.aws_region:
        s3 = clients.s3(credentials, region)
    _write_read_delete_probe(s3, destination)
    return WriteCheckResult(role_arn=arn, bucket_region=region)


def _refuse_what_sts_would_refuse_locally(settings: Settings, destination: Destination) -> None:
    from lineage_core.demo.local_trust import trust_problem  # demo code, loaded only in the demo

    problem = trust_problem(settings, destination)
    if problem is not None:
        raise WriteCheckError(
            f"Could not assume the trust role {destination.role_arn}: {problem}. "
            + _TRUST_ADVICE.format(account=destination.account_id)
        )


def _assume(settings: Settings, sts: STSClient, arn: str, destination: Destination) -> aws.AssumedCredentials:
    try:
        return aws.assume_role(settings, arn, destination.external_id, sts=sts)
    except (ClientError, BotoCoreError) as error:
        raise WriteCheckError(
            f"Could not assume the trust role {arn}: {describe_aws_error(error)}. "
            + _TRUST_ADVICE.format(account=destination.account_id)
        ) from error


def _refuse_unconditional_trust(settings: Settings, sts: STSClient, arn: str) -> None:
    # AWS's confused-deputy guidance: a role we can assume without the External ID could be pointed
    # at us by anyone who learns its ARN. Only an AccessDenied proves the condition is enforced.
    try:
        aws.assume_role(settings, arn, None, sts=sts)
    except ClientError as error:
        if error_code(error) == "AccessDenied":
            return
        raise WriteCheckError(
            f"Could not assume the trust role {arn} to confirm that it requires the External ID: "
            f"{describe_aws_error(error)}. Try saving again in a minute."
        ) from error
    except BotoCoreError as error:
        raise WriteCheckError(
            f"Could not assume the trust role {arn}: {describe_aws_error(error)}. Try saving again."
        ) from error
    raise WriteCheckError(
        f"Could not assume the trust role {arn} safely: the role can be assumed without the External ID. "
        "Its trust policy must require the External ID shown on this screen; deploy the downloaded "
        "template unchanged, or add the sts:ExternalId condition to the role's trust policy."
    )


def _bucket_region(s3: S3Client, destination: Destination) -> str:
    where = s3_url(destination.bucket, destination.prefix)
    try:
        # str, not the stubs' region literals: us-east-1 answers None (or ""), old eu-west-1 "EU".
        location: str | None = s3.get_bucket_location(Bucket=destination.bucket).get("LocationConstraint")
    except ClientError as error:
        if error_code(error) == "NoSuchBucket":
            raise WriteCheckError(
                f"Could not write to {where}: the bucket {destination.bucket} does not exist. "
                "Check the bucket name."
            ) from error
        raise WriteCheckError(
            f"Could not write to {where}: the role could not look up the bucket's region "
            f"({describe_aws_error(error)}). " + WRITE_ADVICE
        ) from error
    except BotoCoreError as error:
        raise WriteCheckError(f"Could not write to {where}: {describe_aws_error(error)}.") from error
    # Buckets in us-east-1 report no constraint; very old eu-west-1 buckets report "EU".
    if not location:
        return "us-east-1"
    return "eu-west-1" if location == "EU" else str(location)


def _write_read_delete_probe(s3: S3Client, destination: Destination) -> None:
    key = probe_key(destination.prefix)
    where = s3_url(destination.bucket, destination.prefix, key.rsplit("/", 1)[-1])
    advice = write_advice(kms=bool(destination.kms_key_arn))
    body = f"write check {secrets.token_hex(16)}\n".encode()
    encryption: dict[str, Any] = {}  # ServerSideEncryption, SSEKMSKeyId when a key is set
    if destination.kms_key_arn:
        encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": destination.kms_key_arn}

    def fail(action: str, error: BaseException) -> WriteCheckError:
        return WriteCheckError(
            f"Could not write to {where}: {action} failed, {describe_aws_error(error)}. {advice}"
        )

    try:
        s3.put_object(Bucket=destination.bucket, Key=key, Body=body, **encryption)
    except (ClientError, BotoCoreError) as error:
        raise fail("PutObject", error) from error
    try:
        try:
            read_back = s3.get_object(Bucket=destination.bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as error:
            raise fail("GetObject", error) from error
        if read_back != body:
            raise WriteCheckError(
                f"Could not write to {where}: the object read back differs from the one written. "
                "Check for bucket policies or replication rules that rewrite objects under the prefix."
            )
        try:
            upload = s3.create_multipart_upload(Bucket=destination.bucket, Key=key, **encryption)
            s3.abort_multipart_upload(Bucket=destination.bucket, Key=key, UploadId=upload["UploadId"])
        except (ClientError, BotoCoreError) as error:
            raise fail("the multipart upload the export uses", error) from error
    except WriteCheckError:
        # Tidy up on the way out, but report the first failure, not a follow-on one.
        with suppress(ClientError, BotoCoreError):
            s3.delete_object(Bucket=destination.bucket, Key=key)
        raise
    _delete_probe(s3, destination.bucket, key, where, advice)


def _delete_probe(s3: S3Client, bucket: str, key: str, where: str, advice: str) -> None:
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except (ClientError, BotoCoreError) as error:
        raise WriteCheckError(
            f"Could not write to {where}: the probe object was written but DeleteObject failed, "
            f"{describe_aws_error(error)}. {advice} (s3:DeleteObject is needed to replace the export.)"
        ) from error
