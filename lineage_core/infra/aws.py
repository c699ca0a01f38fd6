"""AWS clients for our side of the trust: our own credentials, and the customer's assumed role.

Every client honours ``Settings.aws_endpoint_url`` so the whole product runs against a local AWS
endpoint (moto server) for the demo and the tests.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import botocore.session
from botocore.config import Config
from botocore.loaders import Loader

from lineage_core.infra.config import Settings

if TYPE_CHECKING:  # the stubs are a development dependency; at run time clients are botocore's
    from types_boto3_s3 import S3Client
    from types_boto3_sts import STSClient

# Background work (exports): adaptive retries absorb throttling and transient network errors.
BACKGROUND_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 5}, connect_timeout=10, read_timeout=60
)
# An admin is waiting on the page (the write check on Save): fail fast and say why.
INTERACTIVE_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 2}, connect_timeout=3, read_timeout=20
)
SESSION_NAME = "openlineage-export"


@dataclass(frozen=True)
class AssumedCredentials:
    access_key_id: str
    secret_access_key: str
    session_token: str

    def __repr__(self) -> str:  # never let a secret reach a log line or a traceback
        return f"AssumedCredentials(access_key_id={self.access_key_id[:4]}…)"


_loader_lock = threading.Lock()
_shared_loader: Loader | None = None


def _botocore_session() -> botocore.session.Session:
    """A new botocore session that shares the process's data loader.

    Each session resolves its own credentials and configuration, as a new boto3 session would, but the
    service models (the S3 one alone is megabytes of JSON) are read and parsed once per process, not
    once per client: that is most of the tenth of a second a cold client costs. Clients are made with
    botocore directly because a boto3 session adds its data path to the loader it is given, every time.
    """
    global _shared_loader
    session = botocore.session.Session()
    with _loader_lock:
        if _shared_loader is None:
            _shared_loader = session.get_component("data_loader")
        else:
            session.register_component("data_loader", _shared_loader)
    return session


def preload_models(settings: Settings) -> None:
    """Load the STS and S3 models now, so that later clients of this process (and of its forks) are quick.

    The worker calls it before it starts taking jobs: RQ runs each job in a fork of the worker, which
    inherits the loaded models instead of loading them again for every export.
    """
    vendor_client(settings, "sts")
    vendor_client(settings, "s3")


def vendor_client(
    settings: Settings, service: str, region: str | None = None, config: Config | None = None
) -> Any:
    """A client with our own (vendor) credentials from the environment."""
    return _botocore_session().create_client(
        service,
        region_name=region or settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=config or BACKGROUND_CONFIG,
    )


def assume_role(
    settings: Settings, role_arn: str, external_id: str | None, sts: STSClient | None = None
) -> AssumedCredentials:
    """Credentials of the customer role. Raises botocore's ClientError as AWS returns it."""
    sts = sts or cast("STSClient", vendor_client(settings, "sts"))
    kwargs: dict[str, Any] = {"RoleArn": role_arn, "RoleSessionName": SESSION_NAME, "DurationSeconds": 3600}
    if external_id is not None:
        kwargs["ExternalId"] = external_id
    creds = sts.assume_role(**kwargs)["Credentials"]
    return AssumedCredentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])


def customer_client(
    settings: Settings,
    credentials: AssumedCredentials,
    service: str,
    region: str | None = None,
    config: Config | None = None,
) -> Any:
    """A client acting as the customer role."""
    return _botocore_session().create_client(
        service,
        region_name=region or settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=config or BACKGROUND_CONFIG,
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
        aws_session_token=credentials.session_token,
    )


class AwsClients(Protocol):
    """Where the write check and the export get their clients: the seam tests substitute stubbed ones at."""

    def sts(self) -> STSClient: ...

    def s3(self, credentials: AssumedCredentials, region: str) -> S3Client: ...


class LiveAwsClients:
    """Real clients. ``config`` sets timeouts and retries: fail fast by default, for an admin waiting
    on Save; the export passes :data:`BACKGROUND_CONFIG`, which retries throttling patiently."""

    def __init__(self, settings: Settings, config: Config = INTERACTIVE_CONFIG) -> None:
        self._settings = settings
        self._config = config

    def sts(self) -> STSClient:
        return cast("STSClient", vendor_client(self._settings, "sts", config=self._config))

    def s3(self, credentials: AssumedCredentials, region: str) -> S3Client:
        return cast(
            "S3Client", customer_client(self._settings, credentials, "s3", region, config=self._config)
        )
