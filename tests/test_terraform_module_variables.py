"""The Terraform module's input validation: every formatted input has validation blocks, bad values fail
``plan`` with the messages customers read, and the rules accept exactly what the portal stores.

The module's own ``variables.tf`` runs without a provider: a real Terraform plans it with good and bad
values.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from lineage_core.setup import cloudformation, destination
from lineage_core.setup.terraform_bundle import hcl_string
from tests.terraform import (
    BASE_SPEC,
    MODULE_DIR,
    Workdir,
    copy_tree,
    declared_variables,
    module_variables,
    validation_messages,
)


@pytest.fixture(scope="module")
def variables_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding only the module's real ``variables.tf``: its validations run without a provider."""
    folder = tmp_path_factory.mktemp("variables-only")
    shutil.copy(MODULE_DIR / "variables.tf", folder / "variables.tf")
    return folder


# -- static check (python-hcl2; no Terraform binary needed) ----------------------------------------------


def test_formatted_inputs_have_validation_blocks_with_sentences() -> None:
    variables = declared_variables(MODULE_DIR / "variables.tf")
    validated = {
        "vendor_account_id",
        "external_id",
        "new_external_id",
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


# -- validation: plans with bad values -------------------------------------------------------------------

GOOD_VALUES = module_variables(BASE_SPEC)

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
        "new_external_id",
        "olx new",
        {
            "The new External ID has 2 to 1224 characters: letters, digits and + = , . @ : / _ -. Copy it "
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
