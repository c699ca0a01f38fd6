"""The deploy module (``deploy/terraform``): layout, documentation, validated inputs, ``terraform fmt``,
python-hcl2, and checkov offline on the module and on its policies rendered as literal JSON.

The AWS provider cannot be installed here, so a real Terraform checks what needs no provider: ``fmt``
on every file, and the root module's ``variables.tf`` alone, planned with bad values, for its
validation blocks.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import (
    DEPLOY_DIR,
    EXAMPLE_DIR,
    NETWORK_DIR,
    POLICIES_DIR,
    REPO_ROOT,
    SETTINGS_DIR,
    Workdir,
    checkov_skips_in,
    copy_tree,
    declared_outputs,
    declared_variables,
    deploy_resources,
    parse_hcl,
    policies_variables,
    require_terraform_version,
    validation_messages,
)
from tests.terraform import run_checkov

MODULES = [DEPLOY_DIR, POLICIES_DIR, SETTINGS_DIR, NETWORK_DIR]
MODULE_IDS = ["root", "policies", "settings", "network"]

# Inputs whose type alone is their validation.
UNVALIDATED = {"tags", "deletion_protection"}

# Every checkov check the module skips, where, and (in the code, next to the skip) why.
EXPECTED_SKIPS = {
    ("CKV2_AWS_57", "aws_secretsmanager_secret.this"),
    ("CKV_AWS_133", "aws_db_instance.this"),
    ("CKV_AWS_31", "aws_elasticache_replication_group.this"),
    ("CKV2_AWS_28", "aws_lb.web"),
    ("CKV2_AWS_76", "aws_lb.web"),
    ("CKV_AWS_91", "aws_lb.web"),
    ("CKV_AWS_378", "aws_lb_target_group.web"),
    ("CKV_AWS_144", "aws_s3_bucket.templates"),
    ("CKV2_AWS_62", "aws_s3_bucket.templates"),
    ("CKV_AWS_18", "aws_s3_bucket.templates"),
    ("CKV2_AWS_6", "aws_s3_bucket.templates"),
    ("CKV_AWS_145", "aws_s3_bucket.templates"),
    ("CKV_AWS_54", "aws_s3_bucket_public_access_block.templates"),
    ("CKV_AWS_56", "aws_s3_bucket_public_access_block.templates"),
}


# -- static checks (python-hcl2) -------------------------------------------------------------------------


def test_every_file_parses_with_python_hcl2() -> None:
    files = sorted(DEPLOY_DIR.rglob("*.tf"))
    assert len(files) >= 20
    for path in files:
        assert isinstance(parse_hcl(path.read_text()), dict), path


@pytest.mark.parametrize("module_dir", MODULES, ids=MODULE_IDS)
def test_module_layout_and_documentation(module_dir: Path) -> None:
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (module_dir / name).is_file(), name
    variables = declared_variables(module_dir / "variables.tf")
    outputs = declared_outputs(module_dir / "outputs.tf")
    for name, body in variables.items():
        assert body.get("description") and body.get("type"), name
    for name, body in outputs.items():
        assert body.get("description"), name
        assert not body.get("sensitive"), f"output {name} is sensitive: outputs carry no secret at all"
    readme = (module_dir / "README.md").read_text()
    inputs = readme.split("## Inputs", 1)[1].split("\n## ", 1)[0]
    documented_outputs = readme.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `([a-z0-9_]+)` \|", inputs, re.M)) == set(variables)
    assert set(re.findall(r"^\| `([a-z0-9_]+)` \|", documented_outputs, re.M)) == set(outputs)


@pytest.mark.parametrize("module_dir", MODULES, ids=MODULE_IDS)
def test_every_input_is_validated(module_dir: Path) -> None:
    for name, body in declared_variables(module_dir / "variables.tf").items():
        if name in UNVALIDATED or (
            module_dir == NETWORK_DIR and name in {"name", "flow_log_group_arn", "flow_log_role_arn"}
        ):
            continue
        assert body.get("validation"), f"variable {name} of {module_dir.name} has no validation block"


def test_the_example_calls_the_module_with_its_required_inputs() -> None:
    config = parse_hcl((EXAMPLE_DIR / "main.tf").read_text())
    call = config["module"][0]["openlineage_export"]
    assert call["source"] == "../../"
    required = {
        name
        for name, body in declared_variables(DEPLOY_DIR / "variables.tf").items()
        if "default" not in body
    }
    assert required <= set(call)
    # deploy/scripts/upgrade reads these outputs and sets these variables of the root configuration.
    assert {"migration", "ecr_repository_url"} <= set(declared_outputs(EXAMPLE_DIR / "main.tf"))
    assert {"image_tag", "service_image_tag"} <= set(declared_variables(EXAMPLE_DIR / "main.tf"))


def test_the_vendor_module_is_apart_from_the_customer_module() -> None:
    """Nothing of the deploy module is in the customer's download, and the two share no file."""
    assert not list((REPO_ROOT / "terraform").rglob("deploy*"))
    text = "\n".join(path.read_text() for path in DEPLOY_DIR.rglob("*.tf"))
    assert '"../../terraform' not in text and "role_templates" not in text


def test_data_stores_are_private_encrypted_and_highly_available() -> None:
    resources = deploy_resources()
    database = resources["aws_db_instance.this"]
    assert database["multi_az"] is True and database["storage_encrypted"] is True
    assert database["publicly_accessible"] is False and database["skip_final_snapshot"] is False
    assert database["deletion_protection"] == "${var.deletion_protection}"
    assert database["backup_retention_period"] == "${var.database.backup_retention_days}"
    redis = resources["aws_elasticache_replication_group.this"]
    assert redis["automatic_failover_enabled"] is True and redis["multi_az_enabled"] is True
    assert redis["transit_encryption_enabled"] is True and redis["at_rest_encryption_enabled"] is True
    assert redis["transit_encryption_mode"] == "required"
    assert "auth_token_wo" in redis
    assert (
        resources["aws_vpc_security_group_ingress_rule.database_from_services"][
            "referenced_security_group_id"
        ]
        == "${aws_security_group.services.id}"
    )
    assert (
        resources["aws_vpc_security_group_ingress_rule.redis_from_services"]["referenced_security_group_id"]
        == "${aws_security_group.services.id}"
    )
    ingress_to_data = [
        address
        for address, body in resources.items()
        if address.startswith("aws_vpc_security_group_ingress_rule.")
        and body["security_group_id"]
        in {"${aws_security_group.database.id}", "${aws_security_group.redis.id}"}
    ]
    assert sorted(ingress_to_data) == [
        "aws_vpc_security_group_ingress_rule.database_from_services",
        "aws_vpc_security_group_ingress_rule.redis_from_services",
    ]


def test_the_load_balancer_serves_tls_and_checks_healthz() -> None:
    resources = deploy_resources()
    listeners = [body for address, body in resources.items() if address.startswith("aws_lb_listener.")]
    assert [(listener["port"], listener["protocol"]) for listener in listeners] == [(443, "HTTPS")]
    assert listeners[0]["ssl_policy"].startswith("ELBSecurityPolicy-TLS13-1-2")
    health = resources["aws_lb_target_group.web"]["health_check"][0]
    assert (health["path"], health["matcher"]) == ("/healthz", "200")
    scheduler = resources["aws_ecs_service.scheduler"]
    assert scheduler["desired_count"] == 2 and scheduler["deployment_maximum_percent"] == 100


# -- a real Terraform ------------------------------------------------------------------------------------


@pytest.mark.terraform
def test_the_deploy_module_is_terraform_fmt_clean(tmp_path: Path) -> None:
    binary = require_terraform_version((1, 10))  # ephemeral blocks
    workdir = Workdir(copy_tree(DEPLOY_DIR, tmp_path / "deploy"), binary)
    result = workdir.fmt_check()
    assert result.returncode == 0, f"terraform fmt -check found changes:\n{result.stdout}{result.stderr}"


BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    ("name", {"name": "Prod_1"}, "The name must be 3 to 20 lowercase"),
    ("certificate", {"certificate_arn": "arn:aws:iam::1:server-certificate/x"}, "ACM certificate ARN"),
    ("zones", {"availability_zones": ["us-east-1a"]}, "Give 2 or 3 availability zone names"),
    ("image-tag", {"image_tag": "release 1"}, "The image tag must be a Docker tag"),
    ("web", {"web": {"count": 3, "max_count": 2}}, "web.count must be at least 1"),
    ("worker-size", {"worker": {"cpu": 300}}, "worker.cpu must be a Fargate CPU size"),
    ("backups", {"database": {"backup_retention_days": 3}}, "database.backup_retention_days must be from 7"),
    ("redis-nodes", {"redis": {"node_count": 1}}, "automatic failover needs a replica"),
    ("retention", {"log_retention_days": 30}, "at least one year"),
    ("proxy-latest", {"proxy_image": "envoyproxy/envoy:latest"}, "pinned tag or digest"),
    ("queue", {"export_queue": "exports!"}, "The export queue may contain only"),
    ("template-prefix", {"template_prefix": "templates/*"}, "The template prefix must be"),
    ("secret-version", {"secret_versions": {"redis_auth_token": 0}}, "Every secret version must be"),
]

GOOD_INPUTS = {
    "domain_name": "lineage.example.com",
    "certificate_arn": "arn:aws:acm:us-east-1:111122223333:certificate/0f3c9e58-1d2b-4c8a-9e7f-5a6b7c8d9e0f",
    "image_tag": "0.1.0",
}


@pytest.fixture(scope="module")
def variables_workdir(tmp_path_factory: pytest.TempPathFactory) -> Workdir:
    """The root module's variables.tf on its own: provider-free, so a real Terraform plans it offline."""
    binary = require_terraform_version((1, 3))
    path = tmp_path_factory.mktemp("deploy-variables")
    shutil.copy(DEPLOY_DIR / "variables.tf", path / "variables.tf")
    workdir = Workdir(path, binary)
    workdir.init()
    return workdir


@pytest.mark.terraform
def test_good_inputs_pass_validation(variables_workdir: Workdir) -> None:
    returncode, diagnostics = variables_workdir.plan_diagnostics(GOOD_INPUTS)
    assert returncode == 0, diagnostics


@pytest.mark.terraform
def test_bad_inputs_are_refused_with_a_message_naming_them(variables_workdir: Workdir) -> None:
    for case, values, message in BAD_INPUTS:
        (variables_workdir.path / "case.auto.tfvars.json").write_text(json.dumps(GOOD_INPUTS | values))
        try:
            returncode, diagnostics = variables_workdir.plan_diagnostics()
        finally:
            (variables_workdir.path / "case.auto.tfvars.json").unlink()
        assert returncode == 1, case
        messages = validation_messages(diagnostics)
        assert any(message in text for text in messages), (case, messages)


# -- checkov -----------------------------------------------------------------------------------------------


def _rendered_policies_config(outputs: dict[str, str]) -> str:
    """The policies as literal JSON in the resources that carry them: the form checkov evaluates.

    checkov does not evaluate documents passed through a module's jsonencode() outputs, so its IAM and
    bucket-policy checks see them only as literals.
    """

    def literal(name: str) -> str:
        return json.dumps(outputs[name])

    return f"""\
resource "aws_iam_policy" "assume_customer_roles" {{
  name   = "olx-prod-assume-customer-roles"
  policy = {literal("assume_customer_roles_policy_json")}
}}

resource "aws_iam_policy" "execution" {{
  name   = "olx-prod-execution"
  policy = {literal("execution_policy_json")}
}}

resource "aws_iam_policy" "collector" {{
  name   = "olx-prod-collector"
  policy = {literal("collector_policy_json")}
}}

resource "aws_iam_policy" "flow_logs" {{
  name   = "olx-prod-flow-logs"
  policy = {literal("flow_logs_policy_json")}
}}

resource "aws_iam_role" "worker" {{
  name               = "olx-prod-worker"
  assume_role_policy = {literal("ecs_tasks_trust_policy_json")}
}}

resource "aws_iam_role_policy_attachment" "worker" {{
  role       = aws_iam_role.worker.name
  policy_arn = aws_iam_policy.assume_customer_roles.arn
}}

resource "aws_iam_role" "flow_logs" {{
  name               = "olx-prod-flow-logs"
  assume_role_policy = {literal("flow_logs_trust_policy_json")}
}}

resource "aws_kms_key" "this" {{
  description         = "olx-prod"
  enable_key_rotation = true
  policy              = {literal("kms_key_policy_json")}
}}
"""


@pytest.mark.terraform
@pytest.mark.slow
def test_checkov_passes_on_the_module_and_its_rendered_policies(tmp_path: Path) -> None:
    binary = require_terraform_version((1, 3))
    policies = Workdir(copy_tree(POLICIES_DIR, tmp_path / "policies"), binary)
    policies.init()
    outputs = policies.apply(policies_variables(), state=tmp_path / "policies.tfstate")
    scan = tmp_path / "scan"
    copy_tree(DEPLOY_DIR, scan / "module")
    (scan / "rendered").mkdir()
    (scan / "rendered" / "main.tf").write_text(_rendered_policies_config(outputs))
    # The module's template path points into the checkout; the copy lies elsewhere.
    (scan / "cfn_templates").mkdir()
    shutil.copy(REPO_ROOT / "cfn_templates" / "openlineage-export-role.yaml", scan / "cfn_templates")

    reports = run_checkov(scan)
    results = [report.get("results", {}) for report in reports]
    failed = [
        (check["check_id"], check["resource"], check["file_path"])
        for result in results
        for check in result.get("failed_checks", [])
    ]
    assert not failed
    passed = {
        (check["check_id"], check["resource"]) for result in results for check in result["passed_checks"]
    }
    # The rendered documents were really evaluated, and passed the IAM checks.
    for check_id in ("CKV_AWS_62", "CKV_AWS_63", "CKV_AWS_286", "CKV_AWS_287", "CKV_AWS_288", "CKV_AWS_290"):
        assert (check_id, "aws_iam_policy.assume_customer_roles") in passed, check_id
        assert (check_id, "aws_iam_policy.execution") in passed, check_id
    skipped = {
        (check["check_id"], re.sub(r"\[.*\]$", "", ".".join(check["resource"].split(".")[-2:])))
        for result in results
        for check in result.get("skipped_checks", [])
    }
    assert skipped == EXPECTED_SKIPS


def test_every_checkov_skip_is_named_and_justified() -> None:
    skips = checkov_skips_in(DEPLOY_DIR)
    found = {check_id for entries in skips.values() for check_id, _ in entries}
    assert found == {check_id for check_id, _ in EXPECTED_SKIPS}
    for path, entries in skips.items():
        for check_id, reason in entries:
            assert len(reason) >= 60, f"{path}: the skip of {check_id} needs a reason"
