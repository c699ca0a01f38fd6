"""The vendor's deploy module (``deploy/terraform``), its image, and what the tests share about them.

The Terraform helpers (a real binary driven offline, python-hcl2) are the customer module's, from
``tests/terraform.py``; this module adds the deploy module's paths and inputs, the README's
configuration table, and checkov run from its own venv (``.venv-checkov``, made by ``.ci/checkov.sh``).

Only provider-free configurations are applied (no registry is reachable): the ``policies`` and
``settings`` submodules, and the root module's ``variables.tf`` on its own for the validation blocks.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.terraform import (
    REPO_ROOT,
    Workdir,
    copy_tree,
    declared_outputs,
    declared_variables,
    parse_hcl,
    require_terraform,
    validation_messages,
)

__all__ = [
    "DEPLOY_DIR",
    "PENDING_SETTINGS",
    "POLICIES_DIR",
    "SETTINGS_DIR",
    "UNSET_IN_PRODUCTION",
    "Workdir",
    "copy_tree",
    "declared_outputs",
    "declared_variables",
    "parse_hcl",
    "validation_messages",
]

DEPLOY_DIR = REPO_ROOT / "deploy" / "terraform"
POLICIES_DIR = DEPLOY_DIR / "modules" / "policies"
SETTINGS_DIR = DEPLOY_DIR / "modules" / "settings"
NETWORK_DIR = DEPLOY_DIR / "modules" / "network"
EXAMPLE_DIR = DEPLOY_DIR / "examples" / "minimal"

# Settings the deploy module gives the services that the README's configuration table does not list
# yet. Each is named here until the README (and lineage_core/infra/config.py) has it; the drift test
# fails once the README lists one, so that it moves out of this list. (CFN_TEMPLATE_BASE_URL, the
# quick-create link's template folder, was the last; the README and Settings have it now.)
PENDING_SETTINGS: set[str] = set()

# README variables the services deliberately do not receive.
UNSET_IN_PRODUCTION = {
    # Unset means real AWS; only the local demo points it at its moto server.
    "AWS_ENDPOINT_URL",
    # Brute-force limits: production runs on their defaults.
    "LOGIN_LIMIT_PER_ACCOUNT",
    "LOGIN_LIMIT_PER_ADDRESS",
    "API_KEY_LIMIT_PER_ADDRESS",
    "API_KEY_LIMIT_PER_PREFIX",
    # The ingest API's bounds: production runs on their defaults too.
    "LINEAGE_MAX_EVENT_BYTES",
    "LINEAGE_BATCH_MAX_EVENTS",
    "LINEAGE_BATCH_MAX_BYTES",
    "LINEAGE_BATCH_CONCURRENCY",
    # Not given by the deploy module yet. Behind the load balancer and the Envoy proxy the portal should
    # get PROXY_HOPS=1 (the ALB appends the client to X-Forwarded-For; Envoy trusts one hop), or every
    # client shares the proxy's address in the per-address limits and the audit trail.
    "PROXY_HOPS",
}

VENDOR_ACCOUNT = "999988887777"


def require_terraform_version(minimum: tuple[int, int]) -> str:
    """The Terraform binary, or skip: the deploy module's syntax needs at least ``minimum``."""
    binary = require_terraform()
    version = Workdir(REPO_ROOT, binary).version()
    found = tuple(int(part) for part in version.split(".")[:2])
    if found < minimum:
        pytest.skip(
            f"Terraform {version} is older than {minimum[0]}.{minimum[1]}, which the deploy module needs "
            "(ephemeral resources, optional object attributes); install Terraform 1.11 or newer"
        )
    return binary


def readme_configuration_variables() -> set[str]:
    """The variable names of the README's configuration table (a row may name several)."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    return names


def policies_variables(partition: str = "aws", region: str = "eu-west-1") -> dict[str, Any]:
    """Inputs of the policies submodule, shaped as the root module passes them."""
    account = VENDOR_ACCOUNT
    return {
        "partition": partition,
        "region": region,
        "account_id": account,
        "execution": {
            "repository_arn": f"arn:{partition}:ecr:{region}:{account}:repository/olx-prod",
            "log_group_arns": [
                f"arn:{partition}:logs:{region}:{account}:log-group:/olx-prod/{name}"
                for name in ("collector", "migrate", "proxy", "scheduler", "web", "worker")
            ],
            "secret_arns": [
                f"arn:{partition}:secretsmanager:{region}:{account}:secret:olx-prod/{name}-AbCdEf"
                for name in ("SECRET_KEY", "METRICS_TOKEN", "DATABASE_URL", "REDIS_URL")
            ],
            "kms_key_arn": f"arn:{partition}:kms:{region}:{account}:key/0f3c9e58-1d2b-4c8a-9e7f-5a6b7c8d9e0f",
        },
        "metrics_log_group_arn": f"arn:{partition}:logs:{region}:{account}:log-group:/olx-prod/metrics",
        "flow_log_group_arn": f"arn:{partition}:logs:{region}:{account}:log-group:/olx-prod/vpc-flow-logs",
        "template_bucket": {"name": f"olx-prod-templates-{account}-{region}", "prefix": "templates"},
    }


def settings_variables(**overrides: Any) -> dict[str, Any]:
    """Inputs of the settings submodule, shaped as the root module passes them."""
    region = "eu-west-1"
    values: dict[str, Any] = {
        "vendor_aws_account_id": VENDOR_ACCOUNT,
        "aws_region": region,
        "export_queue": "exports",
        "web_concurrency": 3,
        "web_threads": 8,
        "secret_arns": {
            key: f"arn:aws:secretsmanager:{region}:{VENDOR_ACCOUNT}:secret:olx-prod/{name}-AbCdEf"
            for key, name in {
                "secret_key": "SECRET_KEY",
                "database_url": "DATABASE_URL",
                "redis_url": "REDIS_URL",
                "metrics_token": "METRICS_TOKEN",
            }.items()
        },
        "cfn_template_base_url": f"https://olx-prod-templates-{VENDOR_ACCOUNT}-{region}.s3.{region}.amazonaws.com/templates/",
        "deployment": "olx-prod",
        "metrics": {
            "host": "lineage.example.com",
            "interval_seconds": 60,
            "namespace": "OpenLineageExport",
            "log_group_name": "/olx-prod/metrics",
        },
    }
    values.update(overrides)
    return values


def resources(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A parsed configuration's resources as ``{"type.name": body}``."""
    found: dict[str, dict[str, Any]] = {}
    for block in config.get("resource", []):
        for kind, named in block.items():
            for name, body in named.items():
                found[f"{kind}.{name}"] = body
    return found


@cache
def deploy_resources() -> dict[str, dict[str, Any]]:
    """Every resource of the deploy root module (all its ``.tf`` files); parsed once, do not modify."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(DEPLOY_DIR.glob("*.tf")):
        found.update(resources(parse_hcl(path.read_text())))
    return found


@cache
def deploy_locals() -> dict[str, Any]:
    """Every ``locals`` value of the deploy root module, as python-hcl2 reads it; parsed once."""
    found: dict[str, Any] = {}
    for path in sorted(DEPLOY_DIR.glob("*.tf")):
        for block in parse_hcl(path.read_text()).get("locals", []):
            found.update(block)
    return found


def checkov_skips_in(directory: Path) -> dict[str, list[tuple[str, str]]]:
    """The ``#checkov:skip=ID:reason`` comments of a module's ``.tf`` files, by file name."""
    skips: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(directory.rglob("*.tf")):
        for match in re.finditer(r"#checkov:skip=([A-Z0-9_]+):(.*)", path.read_text()):
            skips.setdefault(str(path.relative_to(directory)), []).append((match[1], match[2].strip()))
    return skips
