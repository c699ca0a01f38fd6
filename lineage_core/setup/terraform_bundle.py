"""The Terraform download: the customer-role module plus a root configuration filled in for one connector.

The module (``terraform/`` in the repository) is static and versioned, like the CloudFormation template.
A download is a zip of that module and a generated ``main.tf`` whose module block carries the
connector's values: the same values the CloudFormation template gets as parameter defaults, so both
create the same role. :func:`root_snippet` is that module block alone, for pasting into an existing
configuration.

Values enter HCL only through :func:`hcl_string`, which escapes them as quoted HCL strings and
neutralises ``${`` and ``%{`` template sequences: no connector value can add an attribute, a block or
an interpolation to the generated configuration.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from lineage_core.infra.models import Connector
from lineage_core.setup.role_spec import RoleSpec

# The repository's terraform/, linked into the package so that an installed wheel carries it.
MODULE_DIR = (Path(__file__).parent / "role_templates" / "terraform").resolve()

# Where the module sits inside the zip, relative to the generated root configuration.
MODULE_SOURCE = "./modules/openlineage-export-role"
MODULE_LABEL = "openlineage_export_role"

# Only Terraform and Markdown files are bundled: a developer's local .terraform/ directory, state or
# tfvars files next to the module (which may hold secrets) must never reach a customer.
_BUNDLED_SUFFIXES = (".tf", ".md")

# A fixed timestamp makes the zip a pure function of the spec (same settings, same bytes).
_ZIP_TIMESTAMP = (2024, 1, 1, 0, 0, 0)

_REQUIRED_VERSION = ">= 1.2"
_AWS_PROVIDER_VERSION = ">= 4.0"

_HCL_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNSAFE_FILENAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+", re.ASCII)


def hcl_string(value: str) -> str:
    """``value`` as a quoted HCL string literal that Terraform reads back as exactly ``value``.

    JSON string escaping is nearly HCL's, but HCL has no ``\\b`` or ``\\f`` escapes, so every control
    character other than newline, carriage return and tab is written as ``\\uNNNN``. HCL strings are
    templates: ``${`` and ``%{`` are written ``$${`` and ``%%{``, HCL's escapes for the literal text.
    """
    parts = []
    for char in value:
        escaped = _HCL_ESCAPES.get(char)
        if escaped is not None:
            parts.append(escaped)
        elif ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or char in "\u2028\u2029":
            parts.append(f"\\u{ord(char):04x}")
        else:
            parts.append(char)
    text = "".join(parts).replace("${", "$${").replace("%{", "%%{")
    return f'"{text}"'


def _attribute_group(pairs: list[tuple[str, str]], indent: str = "  ") -> list[str]:
    """Lines ``name = "value"`` with the ``=`` aligned, as ``terraform fmt`` writes consecutive attributes."""
    width = max(len(name) for name, _ in pairs)
    return [f"{indent}{name.ljust(width)} = {hcl_string(value)}" for name, value in pairs]


def root_snippet(spec: RoleSpec, source: str = MODULE_SOURCE) -> str:
    """The ``module`` block that creates the role for ``spec``, formatted as ``terraform fmt`` would.

    Args:
        spec: The connector's role values.
        source: Where the module is, relative to the configuration the block is pasted into.

    Returns:
        HCL text ending in a newline. Optional values the connector doesn't have are left out, so the
        module's defaults (no KMS key, no permissions boundary, no new External ID) apply.
    """
    role = [
        ("account_id", spec.customer_account_id),
        ("role_name", spec.role_name),
        ("role_path", spec.role_path),
    ]
    if spec.permissions_boundary_arn:
        role.append(("permissions_boundary_arn", spec.permissions_boundary_arn))
    ours = [("vendor_account_id", spec.vendor_account_id), ("external_id", spec.external_id)]
    if spec.new_external_id:
        # During an External ID rotation: the role trusts both until Foundational switched to this one.
        ours.append(("new_external_id", spec.new_external_id))
    destination = [("bucket_name", spec.bucket), ("prefix", spec.prefix)]
    if spec.kms_key_arn:
        destination.append(("kms_key_arn", spec.kms_key_arn))

    lines = [
        f"module {hcl_string(MODULE_LABEL)} {{",
        *_attribute_group([("source", source)]),
        "",
        "  # Filled in by Foundational for this connection: do not change.",
        *_attribute_group(ours),
        "",
        "  # Your AWS account and the role, as entered in Foundational.",
        *_attribute_group(role),
        "",
        "  # Export destination.",
        *_attribute_group(destination),
        "}",
    ]
    return "\n".join(lines) + "\n"


def root_configuration(spec: RoleSpec) -> str:
    """The generated root ``main.tf`` of the zip: provider setup, :func:`root_snippet`, and outputs."""
    header = f"""\
# Generated by Foundational for one OpenLineage export connection. It creates the IAM role that
# Foundational assumes to write the export, in the AWS account given as account_id below.
#
#   terraform init
#   terraform apply
#
# Then return to Foundational and click Save. See README.md.

terraform {{
  required_version = {hcl_string(_REQUIRED_VERSION)}

  required_providers {{
    aws = {{
      source  = "hashicorp/aws"
      version = {hcl_string(_AWS_PROVIDER_VERSION)}
    }}
  }}
}}

variable "region" {{
  description = "Any Region of the account's partition (IAM is global). Null: AWS_REGION or the profile's."
  type        = string
  default     = null
}}

provider "aws" {{
  region = var.region
}}

"""
    footer = f"""
output "role_arn" {{
  description = "ARN of the role Foundational assumes."
  value       = module.{MODULE_LABEL}.role_arn
}}

output "role_name" {{
  description = "Name of the role."
  value       = module.{MODULE_LABEL}.role_name
}}
"""
    return header + root_snippet(spec) + footer


def _readme() -> str:
    # No connector value appears here: the README is static text, the values live in main.tf.
    return f"""\
# Foundational OpenLineage export role (Terraform)

This folder creates the IAM role that Foundational assumes to write the OpenLineage export into your
S3 bucket. It is the same role as the CloudFormation template on the setup page creates: use one or
the other, not both.

- `main.tf`: this connection's values, filled in by Foundational. Do not change the External ID or
  Foundational's account ID.
- `{MODULE_SOURCE.removeprefix("./")}/`: the module (see its README for every input).

## Create the role

1. Use credentials for the AWS account entered in Foundational (`account_id` in `main.tf`); the
   module refuses to create the role in any other account. Set `AWS_REGION` (any Region of the
   account's partition), or pass `-var region=...`.
2. Run `terraform init` and then `terraform apply`.
3. Return to Foundational and click **Save**: Foundational assumes the role and writes a small probe
   object to check access.

## Already manage AWS with Terraform?

Copy `{MODULE_SOURCE.removeprefix("./")}/` into your configuration and paste the `module` block
from `main.tf` (it is also shown on the setup page). Adjust `source` to where you put the module.
"""


def _zip_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIMESTAMP)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16  # rw-r--r--, whatever the umask of the server
    return info


def module_files(module_dir: Path = MODULE_DIR) -> list[Path]:
    """The module's files that go into the zip, relative to ``module_dir``, sorted.

    Raises:
        FileNotFoundError: ``module_dir`` has no ``main.tf`` (the module did not ship with the code).
    """
    if not (module_dir / "main.tf").is_file():
        raise FileNotFoundError(f"the Terraform module is missing: no main.tf in {module_dir}")
    return sorted(
        path.relative_to(module_dir)
        for path in module_dir.rglob("*")
        if path.is_file()
        and path.suffix in _BUNDLED_SUFFIXES
        and not any(part.startswith(".") for part in path.relative_to(module_dir).parts)
    )


def bundle_folder(spec: RoleSpec) -> str:
    """The zip's top-level folder, e.g. ``openlineage-export-<role_name>-terraform``."""
    return f"openlineage-export-{_filename_part(spec.role_name)}-terraform"


def build_zip(spec: RoleSpec, module_dir: Path = MODULE_DIR) -> bytes:
    """The Terraform download for ``spec``: one folder with ``main.tf``, ``README.md`` and the module.

    The zip is deterministic: the same spec and module give the same bytes.

    Raises:
        FileNotFoundError: the module is not at ``module_dir``.
    """
    folder = bundle_folder(spec)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(_zip_entry(f"{folder}/main.tf"), root_configuration(spec))
        archive.writestr(_zip_entry(f"{folder}/README.md"), _readme())
        module_prefix = f"{folder}/{MODULE_SOURCE.removeprefix('./')}"
        for relative in module_files(module_dir):
            archive.writestr(
                _zip_entry(f"{module_prefix}/{relative.as_posix()}"),
                (module_dir / relative).read_bytes(),
            )
    return buffer.getvalue()


def _filename_part(role_name: str) -> str:
    # Role names may contain + = , @, awkward in a Content-Disposition header and in a shell.
    return _UNSAFE_FILENAME_CHARS.sub("-", role_name).strip(".-") or "role"


def download_name(connector: Connector) -> str:
    """The zip's file name, e.g. ``openlineage-export-<role_name>-terraform.zip``."""
    return f"openlineage-export-{_filename_part(connector.role_name or '')}-terraform.zip"
