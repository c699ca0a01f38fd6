"""What the deployed services receive is exactly the README's configuration table.

A real Terraform applies the provider-free ``deploy/terraform/modules/settings`` offline and the names
it gives the containers are compared with the README's table (plus the named pending settings, minus
the named ones production leaves unset), so the two cannot drift. The proxy's and the collector's
configuration come from the same module and are checked against the same settings, and the metrics
the alarms and the worker scaling read against what the collector publishes and the product reports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import (
    DEPLOY_DIR,
    PENDING_SETTINGS,
    REPO_ROOT,
    SETTINGS_DIR,
    UNSET_IN_PRODUCTION,
    Workdir,
    copy_tree,
    deploy_locals,
    deploy_resources,
    parse_hcl,
    readme_configuration_variables,
    require_terraform_version,
    settings_variables,
)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    binary = require_terraform_version((1, 3))
    workdir = Workdir(copy_tree(SETTINGS_DIR, tmp_path_factory.mktemp("deploy-settings")), binary)
    workdir.init()
    return workdir.apply(settings_variables(), state=tmp_path_factory.mktemp("state") / "terraform.tfstate")


def test_the_pending_and_unset_lists_are_still_needed() -> None:
    """Fails once the README lists a pending setting: move it out of PENDING_SETTINGS (tests/deploy.py)."""
    readme = readme_configuration_variables()
    assert len(readme) >= 10, "the README's configuration table was not found"
    assert not PENDING_SETTINGS & readme, f"the README now documents {PENDING_SETTINGS & readme}: drop them"
    assert readme >= UNSET_IN_PRODUCTION


@pytest.mark.terraform
def test_the_services_receive_exactly_the_readme_configuration(settings: dict[str, Any]) -> None:
    readme = readme_configuration_variables()
    received = set(settings["variable_names"])
    assert received == (readme - UNSET_IN_PRODUCTION) | PENDING_SETTINGS
    assert len(settings["variable_names"]) == len(received)  # none given twice
    environment = {item["name"] for item in settings["environment"]}
    secrets = {item["name"] for item in settings["secrets"]}
    assert not environment & secrets


@pytest.mark.terraform
def test_secrets_come_from_secrets_manager_and_the_rest_is_plain(settings: dict[str, Any]) -> None:
    arns = settings_variables()["secret_arns"]
    assert settings["secrets"] == [
        {"name": "DATABASE_URL", "valueFrom": arns["database_url"]},
        {"name": "METRICS_TOKEN", "valueFrom": arns["metrics_token"]},
        {"name": "REDIS_URL", "valueFrom": arns["redis_url"]},
        {"name": "SECRET_KEY", "valueFrom": arns["secret_key"]},
    ]
    variables = settings_variables()
    assert {item["name"]: item["value"] for item in settings["environment"]} == {
        "AWS_REGION": "eu-west-1",
        "CFN_TEMPLATE_BASE_URL": variables["cfn_template_base_url"],
        "EXPORT_QUEUE": "exports",
        "LOCAL_MODE": "false",
        "PORTAL_PORT": "8000",
        "REQUIRE_EXTERNAL_ID_ENFORCEMENT": "true",
        "VENDOR_AWS_ACCOUNT_ID": variables["vendor_aws_account_id"],
        "WEB_CONCURRENCY": "3",
        "WEB_THREADS": "8",
    }


@pytest.mark.terraform
def test_the_settings_parse_as_the_product_parses_them(settings: dict[str, Any]) -> None:
    """The plain values, with stand-ins for the secrets, pass the product's own strict parser."""
    from lineage_core.infra.config import Settings
    from portal.serve import gunicorn_options

    env = {item["name"]: item["value"] for item in settings["environment"]}
    env |= {
        "SECRET_KEY": "s" * 64,
        "METRICS_TOKEN": "m" * 48,
        "DATABASE_URL": "postgresql://openlineage:pw@db.internal:5432/openlineage?sslmode=require",
        "REDIS_URL": "rediss://:token@redis.internal:6379/0",
    }
    parsed = Settings.from_env(env)
    assert parsed.vendor_account_id == settings_variables()["vendor_aws_account_id"]
    assert parsed.require_external_id_enforcement is True
    assert parsed.local_mode is False
    assert parsed.aws_endpoint_url is None
    assert gunicorn_options(env)["bind"] == ["127.0.0.1:8000"]
    assert gunicorn_options(env)["workers"] == 3
    assert gunicorn_options(env)["worker_class"] == "gthread"
    assert gunicorn_options(env)["threads"] == 8


@pytest.mark.terraform
def test_the_proxy_forwards_the_load_balancer_to_gunicorn_on_loopback(settings: dict[str, Any]) -> None:
    config = json.loads(settings["proxy_config_json"])
    (listener,) = config["static_resources"]["listeners"]
    assert listener["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 8080}  # noqa: S104
    (cluster,) = config["static_resources"]["clusters"]
    (endpoint,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    portal_port = next(item["value"] for item in settings["environment"] if item["name"] == "PORTAL_PORT")
    assert endpoint["endpoint"]["address"]["socket_address"] == {
        "address": "127.0.0.1",
        "port_value": int(portal_port),
    }
    assert config["admin"] == {}  # no admin listener


@pytest.mark.terraform
def test_the_collector_scrapes_metrics_with_the_token(settings: dict[str, Any]) -> None:
    config = json.loads(settings["collector_config_json"])
    (scrape,) = config["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert (scrape["scheme"], scrape["metrics_path"]) == ("https", "/metrics")
    assert scrape["static_configs"] == [{"targets": ["lineage.example.com:443"]}]
    # The collector's own lookup of its METRICS_TOKEN secret, not a value.
    assert scrape["authorization"] == {"type": "Bearer", "credentials": "${env:METRICS_TOKEN}"}
    emf = config["exporters"]["awsemf"]
    assert (emf["namespace"], emf["log_group_name"]) == ("OpenLineageExport", "/olx-prod/metrics")
    published = {
        selector.strip("^$"): declaration["dimensions"]
        for declaration in emf["metric_declarations"]
        for selector in declaration["metric_name_selectors"]
    }
    assert published == {
        name: [["Deployment", *labels]] for name, labels in settings["metric_dimensions"].items()
    }


def _namespace_metrics(path: Path) -> set[str]:
    """The metric names the alarms or scaling policies of ``path`` read from the product's namespace."""
    text = path.read_text()
    names = set(
        re.findall(r'namespace\s*=\s*local\.metrics_namespace\s*\n\s*metric_name\s*=\s*"([a-z_]+)"', text)
    )
    return names


@pytest.mark.terraform
def test_alarms_and_scaling_read_metrics_the_collector_publishes_and_the_product_reports(
    settings: dict[str, Any],
) -> None:
    used = _namespace_metrics(DEPLOY_DIR / "alarms.tf") | _namespace_metrics(DEPLOY_DIR / "autoscaling.tf")
    assert used == {"olx_last_tick_age_seconds", "olx_export_runs_total", "olx_queue_depth", "olx_redis_up"}
    assert used <= set(settings["metric_dimensions"])
    # The product reports each of them on /metrics (a counter family gains _total when exposed).
    source = (REPO_ROOT / "lineage_core" / "ops" / "metrics.py").read_text()
    for name in settings["metric_dimensions"]:
        assert f'"{name.removesuffix("_total")}"' in source, f"/metrics does not report {name}"


def test_every_product_container_gets_the_settings_module_and_nothing_else() -> None:
    product = deploy_locals()["product_container"]
    assert product["environment"] == "${module.settings.environment}"
    assert product["secrets"] == "${module.settings.secrets}"
    containers_source = (DEPLOY_DIR / "ecs.tf").read_text()
    # Product containers are merge(local.product_container, {...}) and never set their own environment.
    for block in re.findall(r"merge\(local\.product_container, \{(.*?)\n      \}\)", containers_source, re.S):
        assert "environment" not in block and "secrets" not in block
    calls = {}
    for block in parse_hcl((DEPLOY_DIR / "main.tf").read_text())["module"]:
        calls.update(block)
    settings_call = calls["settings"]
    assert settings_call["vendor_aws_account_id"] == "${local.account_id}"
    assert settings_call["cfn_template_base_url"] == "${local.cfn_template_base_url}"
    assert settings_call["web_concurrency"] == "${var.web.concurrency}"
    assert settings_call["web_threads"] == "${var.web.threads}"
    resources = deploy_resources()
    secrets = resources["aws_secretsmanager_secret.this"]
    assert secrets["for_each"] == "${local.secret_names}"
    assert set(deploy_locals()["secret_names"].values()) == {
        "SECRET_KEY",
        "METRICS_TOKEN",
        "DATABASE_URL",
        "REDIS_URL",
    }


def test_no_secret_value_reaches_state_or_outputs() -> None:
    """Generated values are ephemeral and reach AWS only through write-only arguments."""
    text = "\n".join(path.read_text() for path in sorted(DEPLOY_DIR.rglob("*.tf")))
    for argument in ("password", "auth_token", "secret_string", "master_password"):
        assert not re.search(rf"^\s*{argument}\s*=", text, re.M), argument
    assert not re.search(r'^resource "random_', text, re.M)
    assert not re.search(r'^data "aws_secretsmanager_secret_version"', text, re.M)
    for uses in re.findall(r"^\s*([a-z_]+)\s*=.*ephemeral\.random_password", text, re.M):
        assert uses.endswith("_wo"), uses
    outputs = (DEPLOY_DIR / "outputs.tf").read_text()
    assert "ephemeral." not in outputs and "secret_version" not in outputs
