"""The policies the Terraform module computes equal those of the CloudFormation role.

The AWS provider cannot be installed offline, so a real Terraform applies the module's provider-free
``modules/policies`` submodule for a matrix of inputs and partitions; the documents it computes are
compared with the role the CloudFormation template creates in moto, and with
``cloudformation.expected_policies``. The role resource itself is compared statically with the
template's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from lineage_core.setup import cloudformation, destination
from tests.terraform import CUSTOMER_ACCOUNT, MATRIX, MODULE_DIR, Case, Workdir, parse_hcl, policy_variables

# -- static check (python-hcl2; no Terraform binary needed) ----------------------------------------------


def test_role_resource_mirrors_the_cloudformation_role() -> None:
    """What the offline tests cannot apply (the provider's resources) is compared with the template."""
    config = parse_hcl((MODULE_DIR / "main.tf").read_text())
    resources: dict[str, dict[str, Any]] = {}
    for block in config["resource"]:
        for kind, named in block.items():
            for name, body in named.items():
                resources[f"{kind}.{name}"] = body
    role = resources["aws_iam_role.this"]
    template_role = cloudformation.load_template()["Resources"]["Role"]["Properties"]

    assert role["name"] == "${var.role_name}"
    assert role["path"] == "${var.role_path}"
    assert role["permissions_boundary"] == "${local.permissions_boundary_arn}"
    assert role["assume_role_policy"] == "${module.policies.trust_policy_json}"
    assert role["description"] == template_role["Description"]
    assert role["max_session_duration"] == template_role["MaxSessionDuration"] == 3600
    assert not {"inline_policy", "managed_policy_arns"} & set(role)

    assert resources["aws_iam_role_policy.s3"]["policy"] == "${module.policies.s3_policy_json}"
    assert resources["aws_iam_role_policy.s3"]["name"] == "${module.policies.s3_policy_name}"
    assert resources["aws_iam_role_policy.kms"]["policy"] == "${module.policies.kms_policy_json}"
    assert resources["aws_iam_role_policy.kms"]["count"] == "${local.kms_key_arn == null ? 0 : 1}"
    assert set(resources) == {"aws_iam_role.this", "aws_iam_role_policy.s3", "aws_iam_role_policy.kms"}

    data_sources = {name for block in config["data"] for kind in block.values() for name in kind}
    assert data_sources == {"current"}
    module_call = config["module"][0]["policies"]
    assert module_call["partition"] == "${data.aws_partition.current.partition}"


# -- a real Terraform -------------------------------------------------------------------------------------


def _cloudformation_role(endpoint: str, case: Case) -> dict[str, Any]:
    """Deploy the rendered template into moto; return the role and its inline policies as IAM holds them."""
    session = boto3.Session(region_name=case.region)
    cfn = session.client("cloudformation", endpoint_url=endpoint)
    cfn.create_stack(
        StackName="openlineage-export-role",
        TemplateBody=cloudformation.render_template(case.spec),
        Capabilities=["CAPABILITY_NAMED_IAM"],
    )
    status = cfn.describe_stacks(StackName="openlineage-export-role")["Stacks"][0]["StackStatus"]
    assert status == "CREATE_COMPLETE", status
    iam = session.client("iam", endpoint_url=endpoint)
    role = iam.get_role(RoleName=case.spec.role_name)["Role"]
    names = iam.list_role_policies(RoleName=case.spec.role_name)["PolicyNames"]
    policies = {
        name: iam.get_role_policy(RoleName=case.spec.role_name, PolicyName=name)["PolicyDocument"]
        for name in names
    }
    return {"role": role, "trust_policy": role["AssumeRolePolicyDocument"], "inline_policies": policies}


def _in_partition(document: Any, partition: str) -> Any:
    # moto 5.2 resolves ${AWS::Partition} to "aws" in every Region (moto/cloudformation/parsing.py),
    # although the role it creates in cn-north-1 has an arn:aws-cn: ARN. Every ARN in the template is
    # built with ${AWS::Partition}, so AWS would give the partition of the stack's Region: say so here.
    # A moto that gets it right makes this a no-op ("arn:aws-cn:" does not contain "arn:aws:").
    if partition == "aws":
        return document
    return json.loads(json.dumps(document).replace('"arn:aws:', f'"arn:{partition}:'))


@pytest.mark.terraform
@pytest.mark.parametrize("case", MATRIX, ids=[case.id for case in MATRIX])
def test_policies_equal_those_of_the_cloudformation_role(
    case: Case, policies_workdir: Workdir, aws: str, tmp_path: Path
) -> None:
    outputs = policies_workdir.apply(policy_variables(case), state=tmp_path / "terraform.tfstate")
    computed = {
        "trust_policy": json.loads(outputs["trust_policy_json"]),
        "inline_policies": {name: json.loads(text) for name, text in outputs["inline_policies"].items()},
    }
    # The individual outputs are the same documents the role's resources use.
    assert json.loads(outputs["s3_policy_json"]) == computed["inline_policies"][outputs["s3_policy_name"]]
    assert ("openlineage-export-kms" in computed["inline_policies"]) == bool(case.spec.kms_key_arn)

    assert computed == cloudformation.expected_policies(case.spec, case.partition)

    deployed = _cloudformation_role(aws, case)
    assert computed["trust_policy"] == _in_partition(deployed["trust_policy"], case.partition)
    assert computed["inline_policies"] == _in_partition(deployed["inline_policies"], case.partition)
    # The role's own attributes, which Terraform passes through from the same values.
    role = deployed["role"]
    assert role["Arn"] == destination.role_arn(
        case.partition, CUSTOMER_ACCOUNT, case.spec.role_path, case.spec.role_name
    )
    assert role["Path"] == case.spec.role_path
    assert role["MaxSessionDuration"] == 3600
    boundary = role.get("PermissionsBoundary", {}).get("PermissionsBoundaryArn")
    assert boundary == case.spec.permissions_boundary_arn


@pytest.mark.terraform
def test_one_initialised_directory_serves_the_whole_matrix(policies_workdir: Workdir, tmp_path: Path) -> None:
    """Applies of different inputs in one directory do not leak into each other (separate state files)."""
    first = policies_workdir.apply(policy_variables(MATRIX[2]), state=tmp_path / "a.tfstate")
    second = policies_workdir.apply(policy_variables(MATRIX[0]), state=tmp_path / "b.tfstate")
    assert "openlineage-export-kms" in first["inline_policies"]
    assert "openlineage-export-kms" not in second["inline_policies"]
    assert not (policies_workdir.path / "terraform.tfstate").exists()
