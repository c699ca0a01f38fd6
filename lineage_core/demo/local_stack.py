"""Deploying a role template to the local AWS endpoint, for the demo (no real AWS at hand).

This does what the admin does in the AWS console in Part 2 of the setup: create a CloudFormation
stack from the downloaded template, acknowledging that it creates a named IAM role. Like CloudFormation
(and unlike the local endpoint), it refuses a template whose Rules fail: ours must be deployed in the
account entered in Foundational (:mod:`lineage_core.demo.local_rules`).
"""

from __future__ import annotations

import re
import time

from lineage_core.demo.local_rules import failed_assertions
from lineage_core.infra.aws import vendor_client
from lineage_core.infra.config import Settings

_DONE = {"CREATE_COMPLETE", "UPDATE_COMPLETE"}
_FAILED_SUFFIXES = ("_FAILED", "ROLLBACK_COMPLETE")


class LocalDeployError(RuntimeError):
    pass


def stack_name_for(role_name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9-]", "-", role_name).strip("-") or "role"
    return f"FoundationalOpenLineageExport-{cleaned}"[:128]


def local_account_id(settings: Settings) -> str:
    """The one AWS account the local endpoint simulates (the caller's)."""
    return str(vendor_client(settings, "sts").get_caller_identity()["Account"])


def stack_exists(settings: Settings, stack_name: str) -> bool:
    cloudformation = vendor_client(settings, "cloudformation")
    return any(
        s["StackName"] == stack_name and s["StackStatus"] != "DELETE_COMPLETE"
        for s in cloudformation.list_stacks()["StackSummaries"]
    )


def deploy_template(settings: Settings, template_body: str, stack_name: str, timeout_s: float = 60) -> str:
    """Create (or replace) the stack on the local endpoint and return the role ARN it outputs.

    Raises:
        LocalDeployError: not in local mode, or the stack did not complete.
    """
    if not settings.aws_endpoint_url:
        raise LocalDeployError("Local deployment needs AWS_ENDPOINT_URL pointing at the local AWS endpoint.")
    account = local_account_id(settings)
    failures = failed_assertions(template_body, account, settings.aws_region)
    if failures:
        raise LocalDeployError(
            f"Stack {stack_name} was not created: the local AWS endpoint is account {account}. "
            + " ".join(failures)
        )
    cloudformation = vendor_client(settings, "cloudformation")
    if stack_exists(settings, stack_name):
        cloudformation.delete_stack(StackName=stack_name)
    cloudformation.create_stack(
        StackName=stack_name, TemplateBody=template_body, Capabilities=["CAPABILITY_NAMED_IAM"]
    )
    deadline = time.monotonic() + timeout_s
    while True:
        stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
        status = stack["StackStatus"]
        if status in _DONE:
            outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
            return str(outputs.get("RoleArn", ""))
        if status.endswith(_FAILED_SUFFIXES) or time.monotonic() > deadline:
            raise LocalDeployError(
                f"Stack {stack_name} ended in {status}: {stack.get('StackStatusReason', '')}"
            )
        time.sleep(0.2)
