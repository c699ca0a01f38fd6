"""The Terraform module in ``terraform/``: its layout and documentation, ``terraform fmt``, and checkov.

The static checks read the module with python-hcl2 (no Terraform binary needed); checkov scans the
module, a generated bundle, and the role with its policies rendered as literal JSON by a real Terraform.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage_core.setup.terraform_bundle import build_zip, hcl_string
from tests.terraform import (
    BASE_SPEC,
    CHECKOV,
    MATRIX,
    MODULE_DIR,
    POLICIES_DIR,
    Workdir,
    copy_tree,
    declared_outputs,
    declared_variables,
    module_variables,
    parse_hcl,
    policy_variables,
    run_checkov,
)

# -- static checks (python-hcl2; no Terraform binary needed) ---------------------------------------------


def test_module_has_the_standard_layout() -> None:
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (MODULE_DIR / name).is_file(), name
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (POLICIES_DIR / name).is_file(), name
    assert (MODULE_DIR / "examples" / "basic" / "main.tf").is_file()


@pytest.mark.parametrize("module_dir", [MODULE_DIR, POLICIES_DIR], ids=["module", "policies"])
def test_every_variable_and_output_is_described_and_typed(module_dir: Path) -> None:
    for name, body in declared_variables(module_dir / "variables.tf").items():
        assert body.get("description"), f"variable {name} has no description"
        assert body.get("type"), f"variable {name} has no type"
    for name, body in declared_outputs(module_dir / "outputs.tf").items():
        assert body.get("description"), f"output {name} has no description"


@pytest.mark.parametrize("module_dir", [MODULE_DIR, POLICIES_DIR], ids=["module", "policies"])
def test_readme_tables_list_every_input_and_output(module_dir: Path) -> None:
    readme = (module_dir / "README.md").read_text()
    inputs = readme.split("## Inputs", 1)[1].split("\n## ", 1)[0]
    outputs = readme.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    documented_inputs = set(re.findall(r"^\| `([a-z0-9_]+)` \|", inputs, re.MULTILINE))
    documented_outputs = set(re.findall(r"^\| `([a-z0-9_]+)` \|", outputs, re.MULTILINE))
    assert documented_inputs == set(declared_variables(module_dir / "variables.tf"))
    assert documented_outputs == set(declared_outputs(module_dir / "outputs.tf"))


def test_example_calls_the_module_by_relative_source() -> None:
    config = parse_hcl((MODULE_DIR / "examples" / "basic" / "main.tf").read_text())
    call = config["module"][0]["openlineage_export_role"]
    assert call["source"] == "../../"
    assert set(module_variables(BASE_SPEC)) - {"kms_key_arn", "permissions_boundary_arn"} <= set(call)


# -- a real Terraform -------------------------------------------------------------------------------------


@pytest.mark.terraform
def test_module_and_example_are_terraform_fmt_clean(terraform_bin: str, tmp_path: Path) -> None:
    workdir = Workdir(copy_tree(MODULE_DIR, tmp_path / "module"), terraform_bin)
    result = workdir.fmt_check()
    assert result.returncode == 0, f"terraform fmt -check found changes:\n{result.stdout}{result.stderr}"


# -- checkov ----------------------------------------------------------------------------------------------


def _rendered_policies_config(policies_workdir: Workdir, state: Path) -> str:
    """The role with its policies as literal JSON strings, the form checkov can evaluate.

    checkov does not evaluate the module's policies through the submodule's jsonencode() outputs
    (it passes even a "*" action there), so its IAM checks see them only when they are literals.
    """
    case = MATRIX[2]  # prefix and KMS key: every statement the role can have
    outputs = policies_workdir.apply(policy_variables(case), state=state)
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

    reports = run_checkov(scan)
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
