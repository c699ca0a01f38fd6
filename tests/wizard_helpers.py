"""Walking the setup wizard through the test client, and preparing the customer's side in moto."""

from __future__ import annotations

import json
from typing import Any

import boto3
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import Connector
from lineage_core.setup.cloudformation import expected_policies
from lineage_core.setup.role_spec import RoleSpec
from tests.conftest import post_form

CUSTOMER_ACCOUNT = "123456789012"  # moto's account; the template's Rule compares it with AWS::AccountId
FORM = {
    "bucket": "acme-lineage",
    "prefix": "foundational/openlineage",
    "account_id": CUSTOMER_ACCOUNT,
    "role_name": "FoundationalOpenLineageExport",
    "interval_days": "14",
    "kms_key_arn": "",
    "role_path": "/",
    "permissions_boundary_arn": "",
}


def start_and_fill(client: FlaskClient, db: Session, **overrides: str) -> Connector:
    """Integrations → Add Account → Start Setup → fill "Set Up New Connection" → Next."""
    response = post_form(client, "/integrations/openlineage/new", None, {})
    assert response.status_code == 302, response.status_code
    setup_url = response.headers["Location"]
    response = post_form(client, setup_url, None, {**FORM, **overrides})
    assert response.status_code == 302, response.get_data(as_text=True)[-2000:]
    connector_id = int(setup_url.rstrip("/").split("/")[-2])
    db.expire_all()
    connector = db.scalars(select(Connector).where(Connector.id == connector_id)).one()
    return connector


def save(client: FlaskClient, connector_id: int) -> Any:
    deploy_url = f"/integrations/openlineage/{connector_id}/deploy"
    return post_form(client, deploy_url, f"/integrations/openlineage/{connector_id}/save", {})


def create_bucket(endpoint: str, bucket: str = "acme-lineage") -> None:
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)


def create_role_through_iam(endpoint: str, spec: RoleSpec) -> str:
    """The role the template creates, made through the IAM API with the very same documents.

    Needed where moto's IAM enforcement is on: moto answers HTTP 500 to S3 calls signed with the
    credentials of a role that CloudFormation created, but enforces the same policy on an IAM-made one.
    """
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    documents = expected_policies(spec)
    role = iam.create_role(
        RoleName=spec.role_name,
        Path=spec.role_path,
        AssumeRolePolicyDocument=json.dumps(documents["trust_policy"]),
    )["Role"]
    for name, document in documents["inline_policies"].items():
        iam.put_role_policy(RoleName=spec.role_name, PolicyName=name, PolicyDocument=json.dumps(document))
    return str(role["Arn"])
