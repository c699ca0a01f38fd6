"""Connecting to the customer's bucket as their role, on the side while the first part is generated."""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_core.export.failures import AssumeRoleError
from lineage_core.infra import aws
from lineage_core.infra.config import Settings
from lineage_core.setup.destination import Destination

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client


def connect(settings: Settings, destination: Destination, clients: aws.AwsClients | None) -> S3Client:
    """An S3 client acting as the customer's role, in the bucket's region.

    Raises:
        AssumeRoleError: the role could not be assumed (AWS's answer inside).
    """
    clients = clients or aws.LiveAwsClients(settings, aws.BACKGROUND_CONFIG)
    try:
        credentials = aws.assume_role(
            settings, destination.role_arn, destination.external_id, sts=clients.sts()
        )
    except (ClientError, BotoCoreError) as error:
        raise AssumeRoleError(error) from error
    return clients.s3(credentials, destination.region or settings.aws_region)


class DeferredClient:
    """A client still being created: the first call waits for it, and raises its creation's error.

    That error is an :class:`AssumeRoleError`, not a botocore one, so the upload never mistakes it
    for a failed S3 request; it aborts (nothing was started) and lets it through.
    """

    def __init__(self, client: Future[S3Client]) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client.result(), name)
