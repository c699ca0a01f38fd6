"""``flask --app portal local ...``: the local demo, against a local AWS endpoint."""

from __future__ import annotations

from typing import TextIO

import click
import yaml
from flask.cli import AppGroup

from lineage_core.demo.local_stack import LocalDeployError, deploy_template, stack_name_for
from portal.cli import current_settings

local_cli = AppGroup("local", help="The local demo (runs against a local AWS endpoint).")


@local_cli.command("deploy-template")
@click.argument("template", type=click.File("r"))
@click.option("--stack-name", help="Defaults to FoundationalOpenLineageExport-<role name>.")
def local_deploy_template(template: TextIO, stack_name: str | None) -> None:
    """Deploy a downloaded TEMPLATE (YAML) to the local AWS endpoint, as Part 2 does in AWS."""
    body = template.read()
    try:
        parsed = yaml.safe_load(body)
        role_name = parsed["Parameters"]["RoleName"]["Default"]
    except (yaml.YAMLError, KeyError, TypeError) as error:
        raise click.ClickException(
            f"{template.name} is not a template downloaded from the portal."
        ) from error
    try:
        arn = deploy_template(current_settings(), body, stack_name or stack_name_for(str(role_name)))
    except LocalDeployError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Deployed. The stack created {arn}. Return to the portal and click Save.")
