"""The Terraform download: HCL escaping, the generated root configuration and snippet, and the zip."""

from __future__ import annotations

import io
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lineage_core.setup import cloudformation, terraform_bundle
from lineage_core.setup.role_spec import RoleSpec
from lineage_core.setup.terraform_bundle import (
    MODULE_LABEL,
    MODULE_SOURCE,
    build_zip,
    download_name,
    hcl_string,
    root_configuration,
    root_snippet,
)
from tests.factories import build_connector
from tests.terraform import MODULE_DIR, Workdir, copy_tree, parse_hcl, require_terraform

SPEC = RoleSpec(
    vendor_account_id="999988887777",
    external_id="olx-3q9V0mX2bK7wTzL1pN8rYc5dHf4sJ6g_",
    role_name="foundational-openlineage",
    role_path="/",
    bucket="acme-lineage",
    prefix="foundational/openlineage",
    customer_account_id="210987654321",
)
FULL_SPEC = replace(
    SPEC,
    role_name="ol+export=1,a.b@c_d-e",
    role_path="/integrations/openlineage/",
    external_id="olx-a+b=c,d.e@f:g/h-i_j",
    prefix="team=data/export(v1)!_+'.x",
    kms_key_arn="arn:aws:kms:eu-west-1:210987654321:key/0f3c9e58-1d2b-4c8a-9e7f-5a6b7c8d9e0f",
    permissions_boundary_arn="arn:aws:iam::210987654321:policy/boundaries/vendor-access",
)
BUCKET_ROOT_SPEC = replace(SPEC, prefix="")
SPECS = {"minimal": SPEC, "every-option": FULL_SPEC, "bucket-root": BUCKET_ROOT_SPEC}

# Strings that would break out of, or interpolate into, a naively quoted HCL string.
NASTY_STRINGS = [
    "${var.x}", "$${x}", "$$${x}", "%{if true}x%{endif}", "%%{", "${", "%{", "$", "%", "$$", "end$",
    'a"b', "back\\slash", "\\${x}", "\\", '\\\\"', "new\nline", "tab\t", "cr\r", "\x00\x01\x1f\x7f",
    "\x08\x0c", "\x85\u200b\u2028\u2029", "é😀", "}", "{", '"}\n} resource "x" "y" {', "#", "//", "/*",
    "<<EOF",
]  # fmt: skip


def _module_arguments(spec: RoleSpec) -> dict[str, str]:
    """What the generated module block must pass: the values the CloudFormation template gets."""
    parameters = cloudformation.parameter_values(spec)
    arguments = {
        "vendor_account_id": parameters["VendorAccountId"],
        "external_id": parameters["ExternalId"],
        "account_id": parameters["CustomerAccountId"],
        "role_name": parameters["RoleName"],
        "role_path": parameters["RolePath"],
        "bucket_name": parameters["BucketName"],
        "prefix": parameters["Prefix"],
        # The template reads "" as none; the module block leaves optional values out instead.
        "kms_key_arn": parameters["KmsKeyArn"],
        "permissions_boundary_arn": parameters["PermissionsBoundaryArn"],
    }
    return {name: value for name, value in arguments.items() if value or name == "prefix"}


def _module_call(config: dict[str, Any]) -> dict[str, Any]:
    (call,) = [block[MODULE_LABEL] for block in config["module"]]
    return dict(call)


def _zip_files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


# -- escaping -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("plain", '"plain"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("line\nbreak\ttab\rcr", '"line\\nbreak\\ttab\\rcr"'),
        ("${var.secret}", '"$${var.secret}"'),
        ("%{ if true }x%{ endif }", '"%%{ if true }x%%{ endif }"'),
        ("$ and % alone", '"$ and % alone"'),
        ("\x08\x0c\x00\x7f\u2028", '"\\u0008\\u000c\\u0000\\u007f\\u2028"'),
        ("ünïcödé 😀", '"ünïcödé 😀"'),
    ],
)
def test_hcl_string_escapes_quotes_controls_and_templates(value: str, literal: str) -> None:
    assert hcl_string(value) == literal


@pytest.mark.terraform
def test_nasty_strings_reach_terraform_exactly_as_given(tmp_path: Path) -> None:
    """Terraform itself reads every escaped string back unchanged (python-hcl2 8.1.4 does not
    unescape ``$${``/``%%{`` and misreads ``%%%{``, so only Terraform can judge these)."""
    outputs = "".join(
        f'output "v{index}" {{\n  value = {hcl_string(value)}\n}}\n'
        for index, value in enumerate(NASTY_STRINGS)
    )
    (tmp_path / "main.tf").write_text(outputs)
    workdir = Workdir(tmp_path, require_terraform())
    workdir.init()
    values = workdir.apply({})
    assert [values[f"v{index}"] for index in range(len(NASTY_STRINGS))] == NASTY_STRINGS
    assert workdir.fmt_check().returncode == 0


# -- the generated root configuration and snippet --------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_python_hcl2_parses_the_root_and_it_carries_the_connectors_values(spec: RoleSpec) -> None:
    config = parse_hcl(root_configuration(spec))
    call = _module_call(config)
    assert call.pop("source") == MODULE_SOURCE
    assert call == _module_arguments(spec)

    assert config["provider"] == [{"aws": {"region": "${var.region}"}}]
    required = config["terraform"][0]["required_providers"][0]["aws"]
    assert required["source"] == "hashicorp/aws"
    outputs = {name for block in config["output"] for name in block}
    assert outputs == {"role_arn", "role_name"}


def test_the_snippet_is_the_module_block_of_the_root() -> None:
    snippet = root_snippet(FULL_SPEC)
    assert snippet in root_configuration(FULL_SPEC)
    assert snippet.startswith(f'module "{MODULE_LABEL}" {{\n') and snippet.endswith("}\n")
    assert _module_call(parse_hcl(snippet))["external_id"] == FULL_SPEC.external_id


def test_snippet_source_can_point_elsewhere() -> None:
    call = _module_call(parse_hcl(root_snippet(SPEC, source="../modules/foundational")))
    assert call["source"] == "../modules/foundational"


def test_snippet_arguments_are_the_module_inputs() -> None:
    parsed = parse_hcl((MODULE_DIR / "variables.tf").read_text())
    variables = {name: body for block in parsed["variable"] for name, body in block.items()}
    required = {name for name, body in variables.items() if "default" not in body}
    for spec in SPECS.values():
        arguments = set(_module_call(parse_hcl(root_snippet(spec)))) - {"source"}
        assert arguments <= set(variables)
        assert required <= arguments


def test_values_cannot_escape_their_strings() -> None:
    hostile = replace(SPEC, role_name='x"\n  role_path = "/evil/"\n  #', prefix='${file("/etc/passwd")}')
    call = _module_call(parse_hcl(root_snippet(hostile)))
    assert call["role_path"] == "/"
    assert call["role_name"] == hostile.role_name


@pytest.mark.terraform
@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_generated_root_is_terraform_fmt_clean(spec: RoleSpec, tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(root_configuration(spec))
    result = Workdir(tmp_path, require_terraform()).fmt_check()
    assert result.returncode == 0, f"terraform fmt -check found changes:\n{result.stdout}{result.stderr}"


_ECHO_OUTPUTS = """\
output "values" {
  value = {
    vendor_account_id        = var.vendor_account_id
    external_id              = var.external_id
    account_id               = var.account_id
    bucket_name              = var.bucket_name
    prefix                   = var.prefix
    role_name                = var.role_name
    role_path                = var.role_path
    kms_key_arn              = var.kms_key_arn
    permissions_boundary_arn = var.permissions_boundary_arn
  }
}
"""


@pytest.mark.terraform
def test_snippet_values_pass_the_modules_validation_and_arrive_intact(tmp_path: Path) -> None:
    """The snippet against the module's real variables.tf: every spec plans cleanly, values unchanged."""
    workdir = Workdir(tmp_path, require_terraform())
    blocks = []
    for index, spec in enumerate(SPECS.values()):
        module = tmp_path / f"module_{index}"
        module.mkdir()
        shutil.copy(MODULE_DIR / "variables.tf", module / "variables.tf")
        (module / "outputs.tf").write_text(_ECHO_OUTPUTS)
        snippet = root_snippet(spec, source=f"./module_{index}").replace(
            f'module "{MODULE_LABEL}"', f'module "connection_{index}"'
        )
        blocks.append(
            snippet + f'output "values_{index}" {{\n  value = module.connection_{index}.values\n}}\n'
        )
    (tmp_path / "main.tf").write_text("\n".join(blocks))
    workdir.init()
    outputs = workdir.apply({})
    for index, spec in enumerate(SPECS.values()):
        expected = {"kms_key_arn": None, "permissions_boundary_arn": None, **_module_arguments(spec)}
        assert outputs[f"values_{index}"] == expected


# -- the zip ---------------------------------------------------------------------------------------------


def test_zip_holds_the_root_readme_and_the_module() -> None:
    files = _zip_files(build_zip(FULL_SPEC))
    folder = terraform_bundle.bundle_folder(FULL_SPEC)
    assert folder == "openlineage-export-ol-export-1-a.b-c_d-e-terraform"
    assert files.pop(f"{folder}/main.tf").decode() == root_configuration(FULL_SPEC)
    readme = files.pop(f"{folder}/README.md").decode()
    assert "terraform apply" in readme
    # Connection values live in main.tf only.
    assert FULL_SPEC.external_id not in readme and FULL_SPEC.bucket not in readme

    module_prefix = f"{folder}/{MODULE_SOURCE.removeprefix('./')}/"
    assert all(name.startswith(module_prefix) for name in files)
    bundled = {name.removeprefix(module_prefix): data for name, data in files.items()}
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert bundled[name] == (MODULE_DIR / name).read_bytes()
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf"):
        assert f"modules/policies/{name}" in bundled
    assert set(bundled) == {path.as_posix() for path in terraform_bundle.module_files()}


def test_zip_is_deterministic_and_world_readable() -> None:
    first, second = build_zip(SPEC), build_zip(SPEC)
    assert first == second
    assert build_zip(BUCKET_ROOT_SPEC) != first
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        for info in archive.infolist():
            assert info.external_attr >> 16 == 0o644, info.filename
            assert info.compress_type == zipfile.ZIP_DEFLATED


def test_zip_leaves_out_state_caches_and_variable_files(tmp_path: Path) -> None:
    module = copy_tree(MODULE_DIR, tmp_path / "terraform")
    (module / ".terraform" / "modules").mkdir(parents=True)
    (module / ".terraform" / "modules" / "modules.json").write_text("{}")
    (module / ".terraform.lock.hcl").write_text("# lock")
    (module / "terraform.tfstate").write_text('{"secret": "state"}')
    (module / "secrets.auto.tfvars").write_text('password = "hunter2"')
    (module / ".hidden.tf").write_text("")
    names = set(_zip_files(build_zip(SPEC, module_dir=module)))
    assert not any(part.startswith(".") for name in names for part in name.split("/"))
    assert not any(name.endswith((".tfstate", ".tfvars", ".hcl")) for name in names)


def test_zip_without_the_module_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Terraform module is missing"):
        build_zip(SPEC, module_dir=tmp_path)


@pytest.mark.terraform
def test_unzipped_bundle_is_terraform_fmt_clean(tmp_path: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(build_zip(FULL_SPEC))) as archive:
        archive.extractall(tmp_path)
    result = Workdir(tmp_path, require_terraform()).fmt_check()
    assert result.returncode == 0, f"terraform fmt -check found changes:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(
    ("role_name", "expected"),
    [
        ("foundational-openlineage", "openlineage-export-foundational-openlineage-terraform.zip"),
        ("ol+export=1,a.b@c_d-e", "openlineage-export-ol-export-1-a.b-c_d-e-terraform.zip"),
        ("..", "openlineage-export-role-terraform.zip"),
        (None, "openlineage-export-role-terraform.zip"),
    ],
)
def test_download_name_is_safe_in_a_header_and_a_shell(role_name: str | None, expected: str) -> None:
    assert download_name(build_connector(role_name=role_name)) == expected


def test_generated_root_asks_for_the_same_versions_as_the_module() -> None:
    module_terraform = parse_hcl((MODULE_DIR / "versions.tf").read_text())["terraform"][0]
    root_terraform = parse_hcl(root_configuration(SPEC))["terraform"][0]
    assert root_terraform["required_version"] == module_terraform["required_version"]
    assert root_terraform["required_providers"] == module_terraform["required_providers"]
