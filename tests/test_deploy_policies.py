"""The IAM, bucket and key policies the deploy module grants: what the product needs and no more.

A real Terraform applies the provider-free ``deploy/terraform/modules/policies`` offline; the documents
it renders are compared with exact expectations. Static checks (python-hcl2) show the root module
attaches those documents, and only those, to the roles and the bucket.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import (
    POLICIES_DIR,
    VENDOR_ACCOUNT,
    Workdir,
    copy_tree,
    deploy_locals,
    deploy_resources,
    policies_variables,
    require_terraform_version,
    validation_messages,
)


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Workdir:
    binary = require_terraform_version((1, 3))
    workdir = Workdir(copy_tree(POLICIES_DIR, tmp_path_factory.mktemp("deploy-policies")), binary)
    workdir.init()
    return workdir


@pytest.fixture(scope="module")
def rendered(policies: Workdir, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    state = tmp_path_factory.mktemp("deploy-policies-state") / "terraform.tfstate"
    outputs = policies.apply(policies_variables(), state=state)
    return {name.removesuffix("_json"): json.loads(value) for name, value in outputs.items()}


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    assert document["Version"] == "2012-10-17"
    return list(document["Statement"])


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _allowed(document: dict[str, Any], action: str, resource: str, secure: bool = True) -> bool:
    """A minimal evaluation of a resource policy for an anonymous caller: an explicit Deny wins."""
    allowed = False
    for statement in _statements(document):
        if not any(fnmatch.fnmatchcase(action, pattern) for pattern in _as_list(statement["Action"])):
            continue
        if not any(fnmatch.fnmatchcase(resource, pattern) for pattern in _as_list(statement["Resource"])):
            continue
        condition = statement.get("Condition")
        if condition == {"Bool": {"aws:SecureTransport": "false"}} and secure:
            continue
        assert condition in (None, {"Bool": {"aws:SecureTransport": "false"}}), condition
        if statement["Effect"] == "Deny":
            return False
        allowed = True
    return allowed


# -- the vendor principal ----------------------------------------------------------------------------------


@pytest.mark.terraform
def test_the_worker_and_portal_policy_is_exactly_sts_assume_role(rendered: dict[str, Any]) -> None:
    assert rendered["assume_customer_roles_policy"] == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AssumeCustomerExportRoles",
                "Effect": "Allow",
                "Action": "sts:AssumeRole",
                # Customer roles are in any account, under any path: every role, and only roles.
                "Resource": "arn:aws:iam::*:role/*",
            }
        ],
    }


def test_the_worker_and_web_roles_get_that_policy_and_nothing_else() -> None:
    resources = deploy_resources()
    assert (
        resources["aws_iam_policy.assume_customer_roles"]["policy"]
        == "${module.policies.assume_customer_roles_policy_json}"
    )
    attachments: dict[str, list[str]] = {}
    for address, body in resources.items():
        if address.startswith("aws_iam_role_policy_attachment."):
            attachments.setdefault(body["role"], []).append(body["policy_arn"])
    assert attachments["${aws_iam_role.worker.name}"] == ["${aws_iam_policy.assume_customer_roles.arn}"]
    assert attachments["${aws_iam_role.web.name}"] == ["${aws_iam_policy.assume_customer_roles.arn}"]
    assert attachments["${aws_iam_role.collector.name}"] == ["${aws_iam_policy.collector.arn}"]
    assert attachments["${aws_iam_role.execution.name}"] == ["${aws_iam_policy.execution.arn}"]
    # No inline policies anywhere, and no role carries managed policies through its own arguments.
    assert not [address for address in resources if address.startswith("aws_iam_role_policy.")]
    for address, body in resources.items():
        if address.startswith("aws_iam_role."):
            assert not {"inline_policy", "managed_policy_arns"} & set(body), address
    # Every IAM policy document comes from the policies submodule.
    for address, body in resources.items():
        if address.startswith("aws_iam_policy."):
            assert body["policy"].startswith("${module.policies."), address


def test_task_roles_per_process() -> None:
    """Web and worker assume customer roles; the scheduler and the migration have no role at all."""
    task_roles = deploy_locals()["task_roles"]
    assert task_roles == {
        "web": "${aws_iam_role.web.arn}",
        "worker": "${aws_iam_role.worker.arn}",
        "scheduler": None,
        "migrate": None,
    }
    resources = deploy_resources()
    product = resources["aws_ecs_task_definition.product"]
    assert product["task_role_arn"] == "${local.task_roles[each.key]}"
    assert product["execution_role_arn"] == "${aws_iam_role.execution.arn}"
    assert resources["aws_ecs_task_definition.collector"]["task_role_arn"] == "${aws_iam_role.collector.arn}"


# -- the template bucket -----------------------------------------------------------------------------------


@pytest.mark.terraform
def test_the_template_bucket_opens_only_the_template_prefix(rendered: dict[str, Any]) -> None:
    document = rendered["template_bucket_policy"]
    bucket = f"arn:aws:s3:::olx-prod-templates-{VENDOR_ACCOUNT}-eu-west-1"
    allows = [statement for statement in _statements(document) if statement["Effect"] == "Allow"]
    assert allows == [
        {
            "Sid": "PublicReadOfRoleTemplates",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"{bucket}/templates/*",
        }
    ]
    assert _allowed(document, "s3:GetObject", f"{bucket}/templates/openlineage-export-role.yaml")
    for action, resource in [
        ("s3:GetObject", f"{bucket}/other/file.yaml"),
        ("s3:GetObject", f"{bucket}/templates-old/openlineage-export-role.yaml"),
        ("s3:GetObject", f"{bucket}/openlineage-export-role.yaml"),
        ("s3:GetObjectVersion", f"{bucket}/templates/openlineage-export-role.yaml"),
        ("s3:ListBucket", bucket),
        ("s3:PutObject", f"{bucket}/templates/openlineage-export-role.yaml"),
        ("s3:DeleteObject", f"{bucket}/templates/openlineage-export-role.yaml"),
        ("s3:PutBucketPolicy", bucket),
    ]:
        assert not _allowed(document, action, resource), (action, resource)
    # Plain HTTP is refused even under the prefix.
    assert not _allowed(document, "s3:GetObject", f"{bucket}/templates/x.yaml", secure=False)


@pytest.mark.terraform
def test_a_template_prefix_that_would_widen_the_public_statement_is_refused(
    policies: Workdir, tmp_path: Path
) -> None:
    for prefix in ["*", "templates/*", "a?b", "${aws:username}", "/templates", "templates/", ""]:
        variables = policies_variables()
        variables["template_bucket"]["prefix"] = prefix
        (policies.path / "bad.auto.tfvars.json").write_text(json.dumps(variables))
        try:
            returncode, diagnostics = policies.plan_diagnostics()
        finally:
            (policies.path / "bad.auto.tfvars.json").unlink()
        assert returncode == 1, prefix
        assert any("template prefix" in message for message in validation_messages(diagnostics)), prefix


def test_the_bucket_policy_and_public_access_block_are_the_rendered_ones() -> None:
    resources = deploy_resources()
    assert (
        resources["aws_s3_bucket_policy.templates"]["policy"]
        == "${module.policies.template_bucket_policy_json}"
    )
    block = resources["aws_s3_bucket_public_access_block.templates"]
    assert (block["block_public_acls"], block["ignore_public_acls"]) == (True, True)
    assert (
        resources["aws_s3_bucket_versioning.templates"]["versioning_configuration"][0]["status"] == "Enabled"
    )
    assert resources["aws_s3_bucket_ownership_controls.templates"]["rule"][0]["object_ownership"] == (
        "BucketOwnerEnforced"
    )
    template = resources["aws_s3_object.role_template"]
    assert template["key"] == "${var.template_prefix}/openlineage-export-role.yaml"
    assert deploy_locals()["cfn_template_base_url"] == (
        "https://${local.template_bucket_name}.s3.${local.region}.amazonaws.com/${var.template_prefix}/"
    )


# -- the other roles and the key --------------------------------------------------------------------------


@pytest.mark.terraform
def test_the_execution_role_reads_only_its_image_logs_and_secrets(rendered: dict[str, Any]) -> None:
    variables = policies_variables()["execution"]
    statements = {statement["Sid"]: statement for statement in _statements(rendered["execution_policy"])}
    assert {sid: (statement["Action"], statement["Resource"]) for sid, statement in statements.items()} == {
        # GetAuthorizationToken supports no resource-level permission: "*" is its only valid resource.
        "EcrLogin": ("ecr:GetAuthorizationToken", "*"),
        "PullProductImage": (
            ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            variables["repository_arn"],
        ),
        "WriteContainerLogs": (
            ["logs:CreateLogStream", "logs:PutLogEvents"],
            [f"{arn}:log-stream:*" for arn in variables["log_group_arns"]],
        ),
        "ReadInjectedSecrets": ("secretsmanager:GetSecretValue", variables["secret_arns"]),
        "DecryptInjectedSecrets": ("kms:Decrypt", variables["kms_key_arn"]),
    }
    assert statements["DecryptInjectedSecrets"]["Condition"] == {
        "StringEquals": {"kms:ViaService": "secretsmanager.eu-west-1.amazonaws.com"}
    }
    assert all(statement["Effect"] == "Allow" for statement in statements.values())


@pytest.mark.terraform
def test_the_collector_writes_only_to_its_log_group(rendered: dict[str, Any]) -> None:
    group = policies_variables()["metrics_log_group_arn"]
    assert _statements(rendered["collector_policy"]) == [
        {
            "Sid": "WriteMetricRecords",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
            "Resource": [group, f"{group}:log-stream:*"],
        }
    ]


@pytest.mark.terraform
def test_trust_policies_name_one_service_of_this_account(rendered: dict[str, Any]) -> None:
    for name, service in [
        ("ecs_tasks_trust_policy", "ecs-tasks.amazonaws.com"),
        ("flow_logs_trust_policy", "vpc-flow-logs.amazonaws.com"),
        ("rds_monitoring_trust_policy", "monitoring.rds.amazonaws.com"),
    ]:
        (statement,) = _statements(rendered[name])
        assert statement["Principal"] == {"Service": service}
        assert statement["Action"] == "sts:AssumeRole"
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": VENDOR_ACCOUNT}
    (ecs,) = _statements(rendered["ecs_tasks_trust_policy"])
    assert ecs["Condition"]["ArnLike"] == {"aws:SourceArn": f"arn:aws:ecs:eu-west-1:{VENDOR_ACCOUNT}:*"}


@pytest.mark.terraform
def test_the_key_policy_names_the_account_and_two_services(rendered: dict[str, Any]) -> None:
    principals = [statement["Principal"] for statement in _statements(rendered["kms_key_policy"])]
    assert principals == [
        {"AWS": f"arn:aws:iam::{VENDOR_ACCOUNT}:root"},
        {"Service": "logs.eu-west-1.amazonaws.com"},
        {"Service": "cloudwatch.amazonaws.com"},
    ]
    logs = _statements(rendered["kms_key_policy"])[1]
    assert logs["Condition"] == {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:eu-west-1:{VENDOR_ACCOUNT}:log-group:*"
        }
    }


@pytest.mark.terraform
def test_arns_follow_the_partition(policies: Workdir, tmp_path: Path) -> None:
    outputs = policies.apply(policies_variables("aws-cn", "cn-north-1"), state=tmp_path / "cn.tfstate")
    text = "".join(outputs.values())
    assert "arn:aws:" not in text
    assert json.loads(outputs["assume_customer_roles_policy_json"])["Statement"][0]["Resource"] == (
        "arn:aws-cn:iam::*:role/*"
    )
