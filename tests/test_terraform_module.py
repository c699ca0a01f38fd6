"""The Terraform module in ``terraform/``: layout, formatting, input validation, and the policies it computes.

The AWS provider cannot be installed offline, so a real Terraform runs the module's provider-free
parts: the ``modules/policies`` submodule (init + apply, for a matrix of inputs and partitions) and the
module's own ``variables.tf`` (plans with good and bad values). The policies Terraform computes are
compared with the role the CloudFormation template creates in moto, and with
``cloudformation.expected_policies``. The role resource itself is compared statically with the
template's.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from lineage_core.setup import cloudformation, destination
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.terraform_bundle import build_zip, hcl_string
from tests.terraform import (
    MODULE_DIR,
    POLICIES_DIR,
    REPO_ROOT,
    Workdir,
    copy_tree,
    parse_hcl,
    require_terraform,
    validation_messages,
)

VENDOR_ACCOUNT = "999988887777"
CUSTOMER_ACCOUNT = "123456789012"  # moto's default account: where the CloudFormation stacks run
CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"

BASE_SPEC = RoleSpec(
    vendor_account_id=VENDOR_ACCOUNT,
    external_id="olx-3q9V0mX2bK7wTzL1pN8rYc5dHf4sJ6g_",
    role_name="foundational-openlineage",
    role_path="/",
    bucket="acme-lineage",
    prefix="",
    customer_account_id=CUSTOMER_ACCOUNT,
)


@dataclass(frozen=True)
class Case:
    id: str
    spec: RoleSpec
    partition: str
    region: str


MATRIX = [
    Case("empty-prefix", BASE_SPEC, "aws", "us-east-1"),
    Case("nested-prefix", replace(BASE_SPEC, prefix="foundational/openlineage/prod"), "aws", "us-east-1"),
    Case(
        "kms-key",
        replace(
            BASE_SPEC,
            prefix="exports",
            kms_key_arn="arn:aws:kms:eu-west-1:123456789012:key/0f3c9e58-1d2b-4c8a-9e7f-5a6b7c8d9e0f",
        ),
        "aws",
        "eu-west-1",
    ),
    Case(
        "role-path-boundary-special-characters",
        replace(
            BASE_SPEC,
            role_name="ol+export=1,a.b@c_d-e",
            role_path="/integrations/openlineage/",
            permissions_boundary_arn="arn:aws:iam::123456789012:policy/boundaries/vendor-access",
            external_id="olx-a+b=c,d.e@f:g/h-i_j",
            prefix="team=data/export(v1)!_+'.x",
        ),
        "aws",
        "us-east-1",
    ),
    Case(
        "aws-cn",
        replace(
            BASE_SPEC, prefix="lineage/cn", kms_key_arn="arn:aws-cn:kms:cn-north-1:123456789012:key/abc-123"
        ),
        "aws-cn",
        "cn-north-1",
    ),
    Case(
        "aws-us-gov",
        replace(BASE_SPEC, kms_key_arn="arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/def-456"),
        "aws-us-gov",
        "us-gov-west-1",
    ),
]


def _policy_variables(case: Case) -> dict[str, Any]:
    return {
        "partition": case.partition,
        "vendor_account_id": case.spec.vendor_account_id,
        "external_id": case.spec.external_id,
        "bucket_name": case.spec.bucket,
        "prefix": case.spec.prefix,
        "kms_key_arn": case.spec.kms_key_arn,
    }


def _module_variables(spec: RoleSpec) -> dict[str, str]:
    """The module's inputs for ``spec``: the same mapping as the generated root configuration."""
    values = {
        "vendor_account_id": spec.vendor_account_id,
        "external_id": spec.external_id,
        "account_id": spec.customer_account_id,
        "bucket_name": spec.bucket,
        "prefix": spec.prefix,
        "role_name": spec.role_name,
        "role_path": spec.role_path,
    }
    if spec.kms_key_arn:
        values["kms_key_arn"] = spec.kms_key_arn
    if spec.permissions_boundary_arn:
        values["permissions_boundary_arn"] = spec.permissions_boundary_arn
    return values


# -- fixtures: one initialised directory per configuration, reused by every case ------------------------


@pytest.fixture(scope="module")
def terraform_bin() -> str:
    return require_terraform()


@pytest.fixture(scope="module")
def policies_workdir(terraform_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Workdir:
    """The policies submodule, copied and initialised once; each case applies with its own state file."""
    workdir = Workdir(copy_tree(POLICIES_DIR, tmp_path_factory.mktemp("policies")), terraform_bin)
    workdir.init()
    return workdir


@pytest.fixture(scope="module")
def variables_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding only the module's real ``variables.tf``: its validations run without a provider."""
    folder = tmp_path_factory.mktemp("variables-only")
    shutil.copy(MODULE_DIR / "variables.tf", folder / "variables.tf")
    return folder


# -- static checks (python-hcl2; no Terraform binary needed) ---------------------------------------------


def _variables(path: Path) -> dict[str, dict[str, Any]]:
    return {name: body for block in parse_hcl(path.read_text())["variable"] for name, body in block.items()}


def _outputs(path: Path) -> dict[str, dict[str, Any]]:
    return {name: body for block in parse_hcl(path.read_text())["output"] for name, body in block.items()}


def test_module_has_the_standard_layout() -> None:
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (MODULE_DIR / name).is_file(), name
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (POLICIES_DIR / name).is_file(), name
    assert (MODULE_DIR / "examples" / "basic" / "main.tf").is_file()


@pytest.mark.parametrize("module_dir", [MODULE_DIR, POLICIES_DIR], ids=["module", "policies"])
def test_every_variable_and_output_is_described_and_typed(module_dir: Path) -> None:
    for name, body in _variables(module_dir / "variables.tf").items():
        assert body.get("description"), f"variable {name} has no description"
        assert body.get("type"), f"variable {name} has no type"
    for name, body in _outputs(module_dir / "outputs.tf").items():
        assert body.get("description"), f"output {name} has no description"


def test_formatted_inputs_have_validation_blocks_with_sentences() -> None:
    variables = _variables(MODULE_DIR / "variables.tf")
    validated = {
        "vendor_account_id",
        "external_id",
        "account_id",
        "bucket_name",
        "prefix",
        "role_name",
        "role_path",
        "kms_key_arn",
        "permissions_boundary_arn",
    }
    assert validated <= set(variables)
    for name in validated:
        rules = variables[name].get("validation", [])
        assert rules, f"variable {name} has no validation block"
        for rule in rules:
            # Terraform before 1.2 insists on this shape; people read it as a sentence anyway.
            assert re.match(r"^[A-Z].*[.?]$", rule["error_message"], re.DOTALL), rule["error_message"]


@pytest.mark.parametrize("module_dir", [MODULE_DIR, POLICIES_DIR], ids=["module", "policies"])
def test_readme_tables_list_every_input_and_output(module_dir: Path) -> None:
    readme = (module_dir / "README.md").read_text()
    inputs = readme.split("## Inputs", 1)[1].split("\n## ", 1)[0]
    outputs = readme.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    documented_inputs = set(re.findall(r"^\| `([a-z0-9_]+)` \|", inputs, re.MULTILINE))
    documented_outputs = set(re.findall(r"^\| `([a-z0-9_]+)` \|", outputs, re.MULTILINE))
    assert documented_inputs == set(_variables(module_dir / "variables.tf"))
    assert documented_outputs == set(_outputs(module_dir / "outputs.tf"))


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


def test_example_calls_the_module_by_relative_source() -> None:
    config = parse_hcl((MODULE_DIR / "examples" / "basic" / "main.tf").read_text())
    call = config["module"][0]["openlineage_export_role"]
    assert call["source"] == "../../"
    assert set(_module_variables(BASE_SPEC)) - {"kms_key_arn", "permissions_boundary_arn"} <= set(call)


# -- a real Terraform -------------------------------------------------------------------------------------


@pytest.mark.terraform
def test_module_and_example_are_terraform_fmt_clean(terraform_bin: str, tmp_path: Path) -> None:
    workdir = Workdir(copy_tree(MODULE_DIR, tmp_path / "module"), terraform_bin)
    result = workdir.fmt_check()
    assert result.returncode == 0, f"terraform fmt -check found changes:\n{result.stdout}{result.stderr}"


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
    outputs = policies_workdir.apply(_policy_variables(case), state=tmp_path / "terraform.tfstate")
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
    first = policies_workdir.apply(_policy_variables(MATRIX[2]), state=tmp_path / "a.tfstate")
    second = policies_workdir.apply(_policy_variables(MATRIX[0]), state=tmp_path / "b.tfstate")
    assert "openlineage-export-kms" in first["inline_policies"]
    assert "openlineage-export-kms" not in second["inline_policies"]
    assert not (policies_workdir.path / "terraform.tfstate").exists()


# -- validation: plans with bad values -------------------------------------------------------------------

GOOD_VALUES = _module_variables(BASE_SPEC)

# (variable, value, every message Terraform must report for it)
MESSAGE_CASES: list[tuple[str, str, set[str]]] = [
    (
        "vendor_account_id",
        "12345",
        {
            "Foundational's AWS account ID is exactly 12 digits. Copy it unchanged from the Foundational "
            "setup page."
        },
    ),
    ("account_id", "1234-5678-9012", {"An AWS account ID is exactly 12 digits (for example: 123456789012)."}),
    (
        "external_id",
        "olx abc",
        {
            "The External ID has 2 to 1224 characters: letters, digits and + = , . @ : / _ -. Copy it "
            "unchanged from the Foundational setup page."
        },
    ),
    (
        "bucket_name",
        "s3://My_Bucket/..",
        {
            "Enter only the bucket name, without s3://, an ARN or a URL (for example: my-bucket).",
            "A bucket name has no '/'. Put folders in the prefix variable.",
            "A bucket name has only lowercase letters, digits, '.' and '-', and starts and ends with a "
            "letter or digit.",
            "A bucket name has no '..', '.-' or '-.'.",
        },
    ),
    ("bucket_name", "ab", {"A bucket name has 3 to 63 characters."}),
    ("bucket_name", "10.0.0.1", {"A bucket name cannot look like an IP address."}),
    ("bucket_name", "lineage-s3alias", {"That bucket name uses a prefix or suffix that AWS reserves."}),
    (
        "prefix",
        "/foundational/openlineage/",
        {"Write the prefix without a leading or trailing '/' (for example: foundational/openlineage)."},
    ),
    ("prefix", "a//b", {"The prefix cannot contain empty folders ('//')."}),
    ("prefix", "exports/../other", {"The prefix cannot contain '.' or '..' folders."}),
    *[
        (
            "prefix",
            wildcard,
            {
                "The prefix may contain letters, digits, '/' between folders, and ! _ . ' ( ) = + -. "
                "Spaces, '*', '?', '$' and other characters are not allowed."
            },
        )
        for wildcard in ("exports/*", "export?", "${aws:username}", "team data")
    ],
    (
        "prefix",
        "a" * 993,
        {"The prefix is too long: object keys under it would exceed 1024 bytes (at most 992 characters)."},
    ),
    ("role_name", "", {"An IAM role name has 1 to 64 characters."}),
    ("role_name", "x" * 65, {"An IAM role name has 1 to 64 characters."}),
    ("role_name", "bad role!", {"An IAM role name has only letters, digits and + = , . @ _ -."}),
    (
        "role_path",
        "integrations",
        {
            "A role path is '/' or folders of letters, digits and + = , . @ _ - between slashes (for "
            "example: /integrations/), at most 512 characters."
        },
    ),
    (
        "kms_key_arn",
        "alias/lineage",
        {
            "Enter the key's full ARN (arn:aws:kms:<region>:<account>:key/<key-id>). Aliases are not "
            "accepted: IAM grants apply to the key ARN."
        },
    ),
    (
        "permissions_boundary_arn",
        "arn:aws:iam::123456789012:role/boundary",
        {"Enter a managed policy ARN (arn:aws:iam::<account>:policy/<name>)."},
    ),
]


def _calls_config(cases: list[tuple[str, str]]) -> tuple[str, dict[int, int]]:
    """A root configuration calling the variables-only module with every (variable, value) case.

    Terraform reports every failing argument of every module call in one plan (the root's own
    variables stop at the first failing one in Terraform 1.11), and each diagnostic points at the
    argument's line. So each call carries up to one case per variable, good values elsewhere, and one
    plan checks them all (a module call costs Terraform ~30 ms). Returns the configuration and a map
    from each case's argument line to the case's index.
    """
    calls: list[dict[str, int]] = []
    for index, (variable, _) in enumerate(cases):
        call = next((call for call in calls if variable not in call), None)
        if call is None:
            call = {}
            calls.append(call)
        call[variable] = index
    lines: list[str] = []
    line_of_case: dict[int, int] = {}
    for number, call in enumerate(calls):
        lines += [f'module "call_{number}" {{', '  source = "./module"']
        for name in {**GOOD_VALUES, **dict.fromkeys(call)}:
            if name in call:
                lines.append(f"  {name} = {hcl_string(cases[call[name]][1])}")
                line_of_case[len(lines)] = call[name]  # 1-based number of the line just added
            else:
                lines.append(f"  {name} = {hcl_string(GOOD_VALUES[name])}")
        lines += ["}", ""]
    return "\n".join(lines), line_of_case


def _plan_cases(
    terraform_bin: str, variables_module: Path, folder: Path, cases: list[tuple[str, str]]
) -> tuple[int, dict[int, set[str]]]:
    """Plan every case in one run; return the exit code and each case's validation messages."""
    shutil.copytree(variables_module, folder / "module")
    config, line_of_case = _calls_config(cases)
    (folder / "main.tf").write_text(config)
    workdir = Workdir(folder, terraform_bin)
    workdir.init()
    returncode, diagnostics = workdir.plan_diagnostics()
    reported: dict[int, set[str]] = {index: set() for index in range(len(cases))}
    for diagnostic in diagnostics:
        assert diagnostic["severity"] != "error" or diagnostic["summary"] == "Invalid value for variable", (
            diagnostic
        )
        if diagnostic["severity"] == "error":
            index = line_of_case[diagnostic["range"]["start"]["line"]]
            reported[index].update(validation_messages([diagnostic]))
    return returncode, reported


@pytest.mark.terraform
def test_plan_with_bad_values_fails_with_the_validation_messages(
    terraform_bin: str, variables_module: Path, tmp_path: Path
) -> None:
    cases = [(variable, value) for variable, value, _ in MESSAGE_CASES]
    returncode, reported = _plan_cases(terraform_bin, variables_module, tmp_path, cases)
    assert returncode == 1
    for index, (variable, value, expected) in enumerate(MESSAGE_CASES):
        assert reported[index] == expected, (variable, value)


@pytest.mark.terraform
def test_plan_of_the_root_variables_fails_with_the_message(
    terraform_bin: str, variables_module: Path, tmp_path: Path
) -> None:
    """As a customer sees it when these are the root's variables: ``plan`` exits 1 with the sentence."""
    workdir = Workdir(copy_tree(variables_module, tmp_path / "root"), terraform_bin)
    workdir.init()
    returncode, diagnostics = workdir.plan_diagnostics({**GOOD_VALUES, "prefix": "exports/*"})
    assert returncode == 1
    assert validation_messages(diagnostics) == [
        "The prefix may contain letters, digits, '/' between folders, and ! _ . ' ( ) = + -. "
        "Spaces, '*', '?', '$' and other characters are not allowed."
    ]
    returncode, diagnostics = workdir.plan_diagnostics(GOOD_VALUES)
    assert (returncode, validation_messages(diagnostics)) == (0, [])


# Values around each rule's edges. The module must accept exactly the values the portal stores: what
# the portal's parser accepts unchanged (so "/a/" is rejected, the portal would store "a").
EDGE_VALUES: dict[str, list[str]] = {
    "bucket_name": [
        "acme-lineage",
        "a.b-c",
        "abc",
        "a" * 63,
        "a" * 64,
        "ab",
        "My-Bucket",
        "my_bucket",
        "s3://acme",
        "arn:aws:s3:::acme",
        "https://acme.s3.amazonaws.com",
        "acme/lineage",
        "-acme",
        "acme-",
        "a..b",
        "a.-b",
        "a-.b",
        "192.168.1.10",
        "256.1.1.1",
        "192.168.01.1",
        "1.2.3",
        "xn--acme",
        "sthree-acme",
        "amzn-s3-demo-acme",
        "acme-s3alias",
        "acme--ol-s3",
        "acme.mrap",
        "acme--x-s3",
        "acme--table-s3",
        " acme",
        "acmé",
    ],
    "prefix": [
        "",
        "a",
        "foundational/openlineage",
        "team=data/(v1)!_+'.x",
        "a/b/c.d",
        "...",
        "a.",
        "/a",
        "a/",
        "a//b",
        "./a",
        "a/.",
        "a/../b",
        "..",
        "a*",
        "a?",
        "$x",
        "a b",
        "ä",
        "a" * 992,
        "a" * 993,
        "a\tb",
        "s3://b/a",
    ],
    "role_name": ["r", "a" * 64, "a" * 65, "", "ol+export=1,a.b@c_d-e", "bad role", "rôle", "a/b", "a*"],
    "role_path": [
        "/",
        "/a/",
        "/a/b/",
        "a/",
        "/a",
        "//",
        "/a//b/",
        "/a b/",
        "/" + "a/" * 255,
        "/" + "a" * 510 + "/",
        "/" + "a" * 511 + "/",
    ],
    "vendor_account_id": ["123456789012", "12345678901", "1234567890123", "1234-5678-9012", "12345678901a"],
    "account_id": ["123456789012", "12345678901", "1234-5678-9012", " 123456789012", "\u0661" * 12],
    "external_id": [
        "olx-AbC_12",
        "ab",
        "a",
        "a" * 1224,
        "a" * 1225,
        "olx+=,.@:/-_x",
        "olx abc",
        "olx$x",
        "olx{x}",
        "olx-é",
    ],
    "kms_key_arn": [
        "",
        "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "arn:aws-cn:kms:cn-north-1:123456789012:key/abc",
        "arn:aws:kms:us-east-1:123456789012:alias/lineage",
        "alias/lineage",
        "arn:aws:kms:us-east-1:12345678901:key/abc",
        "arn:aws:kms:us-east-1:123456789012:key/",
    ],
    "permissions_boundary_arn": [
        "",
        "arn:aws:iam::123456789012:policy/boundary",
        "arn:aws:iam::aws:policy/PowerUserAccess",
        "arn:aws-us-gov:iam::123456789012:policy/path/to/boundary",
        "arn:aws:iam::123456789012:role/boundary",
        "boundary",
    ],
}

_PORTAL_PARSERS: dict[str, Callable[[str], str | None]] = {
    "bucket_name": destination.parse_bucket_name,
    "prefix": destination.parse_prefix,
    "role_name": destination.parse_role_name,
    "role_path": destination.parse_role_path,
    "vendor_account_id": destination.parse_account_id,
    "account_id": destination.parse_account_id,
    "kms_key_arn": destination.parse_kms_key_arn,
    "permissions_boundary_arn": destination.parse_permissions_boundary_arn,
}


def _accepted_elsewhere(variable: str, value: str) -> bool:
    """Whether the portal stores ``value`` unchanged (the External ID: whether the template accepts it)."""
    if variable == "external_id":
        # The portal only mints 32+ character IDs; the rule both IaC flavours apply is IAM's, 2 to 1224.
        parameters = cloudformation.load_template()["Parameters"]
        return not cloudformation.parameter_violations(parameters, {"ExternalId": value})
    try:
        stored = _PORTAL_PARSERS[variable](value)
    except destination.FieldError:
        return False
    return (stored or "") == value


@pytest.mark.terraform
def test_validation_accepts_exactly_what_the_portal_stores(
    terraform_bin: str, variables_module: Path, tmp_path: Path
) -> None:
    cases = [(variable, value) for variable, values in EDGE_VALUES.items() for value in values]
    _, reported = _plan_cases(terraform_bin, variables_module, tmp_path, cases)
    disagreements = [
        (variable, value, sorted(reported[index]))
        for index, (variable, value) in enumerate(cases)
        if (not reported[index]) != _accepted_elsewhere(variable, value)
    ]
    assert not disagreements
    assert sum(1 for messages in reported.values() if messages) > len(cases) // 2  # both sides exercised


# -- checkov ----------------------------------------------------------------------------------------------


def _rendered_policies_config(policies_workdir: Workdir, state: Path) -> str:
    """The role with its policies as literal JSON strings, the form checkov can evaluate.

    checkov does not evaluate the module's policies through the submodule's jsonencode() outputs
    (it passes even a "*" action there), so its IAM checks see them only when they are literals.
    """
    case = MATRIX[2]  # prefix and KMS key: every statement the role can have
    outputs = policies_workdir.apply(_policy_variables(case), state=state)
    policies = outputs["inline_policies"]
    # The module's reviewed checkov suppressions for the role apply to its rendered form too.
    skips = "".join(
        f"  {line.strip()}\n"
        for line in (MODULE_DIR / "main.tf").read_text().splitlines()
        if line.strip().startswith("#checkov:skip=")
    )
    return f"""\
resource "aws_iam_role" "this" {{
{skips}  name                 = {hcl_string(case.spec.role_name)}
  assume_role_policy   = {hcl_string(outputs["trust_policy_json"])}
  max_session_duration = 3600
}}

resource "aws_iam_role_policy" "s3" {{
  name   = "openlineage-export-s3"
  role   = aws_iam_role.this.id
  policy = {hcl_string(policies["openlineage-export-s3"])}
}}

resource "aws_iam_role_policy" "kms" {{
  name   = "openlineage-export-kms"
  role   = aws_iam_role.this.id
  policy = {hcl_string(policies["openlineage-export-kms"])}
}}
"""


def _checkov(directory: Path) -> list[dict[str, Any]]:
    # One -d only: checkov 3.3.30 given several -d reports the first directory twice and never the
    # others. A parent folder holding several root configurations is scanned correctly.
    command = [
        str(CHECKOV),
        "--skip-download",
        "--framework",
        "terraform",
        "--output",
        "json",
        "-d",
        str(directory),
    ]
    # checkov imports only its own venv's packages: no PYTHONPATH from the caller's environment.
    environment = {
        name: value for name, value in os.environ.items() if name not in {"PYTHONPATH", "PYTHONHOME"}
    }
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, env=environment
    )
    assert completed.stdout.strip(), completed.stderr
    reports = json.loads(completed.stdout)
    return reports if isinstance(reports, list) else [reports]


@pytest.fixture
def checkov() -> Iterator[Path]:
    if not CHECKOV.is_file():
        pytest.skip("checkov's own venv is missing: run .ci/checkov.sh (creates .venv-checkov)")
    yield CHECKOV


@pytest.mark.terraform
@pytest.mark.slow
def test_checkov_passes_on_the_module_the_bundle_and_the_rendered_policies(
    checkov: Path, policies_workdir: Workdir, tmp_path: Path
) -> None:
    scan = tmp_path / "scan"
    copy_tree(MODULE_DIR, scan / "module")
    rendered = scan / "rendered"
    rendered.mkdir()
    (rendered / "main.tf").write_text(_rendered_policies_config(policies_workdir, tmp_path / "r.tfstate"))
    with zipfile.ZipFile(io.BytesIO(build_zip(MATRIX[3].spec))) as archive:
        archive.extractall(scan / "bundle")

    reports = _checkov(scan)
    failed = [
        (check["check_id"], check["resource"], check["file_path"])
        for report in reports
        for check in report.get("results", {}).get("failed_checks", [])
    ]
    assert not failed
    passed = {
        (check["check_id"], check["resource"])
        for report in reports
        for check in report.get("results", {}).get("passed_checks", [])
    }
    # The rendered policies were really evaluated: the IAM policy checks ran on them and passed.
    for check_id in ("CKV_AWS_62", "CKV_AWS_63", "CKV_AWS_286", "CKV_AWS_288", "CKV_AWS_290"):
        assert (check_id, "aws_iam_role_policy.s3") in passed, check_id
    assert ("CKV_AWS_60", "aws_iam_role.this") in passed
    skipped = {
        (check["check_id"], check["resource"], check["file_path"])
        for report in reports
        for check in report["results"].get("skipped_checks", [])
    }
    # The one reviewed exception (see terraform/main.tf), on the role only; in the rendered form it is
    # what keeps the real trust policy from failing.
    assert {(check_id, resource.rsplit(".", 2)[-2]) for check_id, resource, _ in skipped} == {
        ("CKV_AWS_61", "aws_iam_role")
    }
    assert ("CKV_AWS_61", "aws_iam_role.this", "/rendered/main.tf") in skipped
    scanned = {
        check["file_path"].split("/")[1] for report in reports for check in report["results"]["passed_checks"]
    }
    assert scanned == {"module", "rendered", "bundle"}
