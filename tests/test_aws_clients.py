"""Our AWS clients: each resolves its own credentials, and all of a process share the loaded models."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.loaders import JSONFileLoader

from lineage_core.infra import aws
from lineage_core.infra.config import Settings


def test_after_preloading_a_new_client_reads_no_model_file(
    base_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.preload_models(base_settings)
    reads: list[Any] = []
    original = JSONFileLoader.load_file
    monkeypatch.setattr(
        JSONFileLoader, "load_file", lambda loader, path: reads.append(path) or original(loader, path)
    )

    credentials = aws.AssumedCredentials("ASIACUSTOMER", "customer-secret", "customer-token")
    s3 = aws.customer_client(base_settings, credentials, "s3", "eu-west-1")
    aws.vendor_client(base_settings, "sts")

    assert reads == []
    assert s3.meta.region_name == "eu-west-1"
    assert s3.meta.endpoint_url == base_settings.aws_endpoint_url


def test_a_customer_client_acts_only_with_the_assumed_credentials(base_settings: Settings) -> None:
    credentials = aws.AssumedCredentials("ASIACUSTOMER", "customer-secret", "customer-token")
    s3 = aws.customer_client(base_settings, credentials, "s3")
    vendor = aws.vendor_client(base_settings, "s3")

    # The request signer is where botocore keeps what it signs with; no public accessor exists.
    signing = s3._request_signer._credentials.get_frozen_credentials()
    assert (signing.access_key, signing.secret_key, signing.token) == (
        "ASIACUSTOMER",
        "customer-secret",
        "customer-token",
    )
    assert vendor._request_signer._credentials.access_key != "ASIACUSTOMER"


def test_assumed_credentials_never_show_their_secrets() -> None:
    credentials = aws.AssumedCredentials("ASIACUSTOMER", "customer-secret", "customer-token")
    assert "secret" not in repr(credentials) and "token" not in repr(credentials)
