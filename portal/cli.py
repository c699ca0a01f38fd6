"""Operator commands: ``flask --app portal <group> <command>``."""

from __future__ import annotations

from typing import TextIO

import click
import yaml
from flask import Flask, current_app

from lineage_core.accounts.users import AccountError, create_organization, create_user, get_organization
from lineage_core.demo.local_stack import LocalDeployError, deploy_template, stack_name_for
from lineage_core.infra import migrate
from lineage_core.infra.db import session_scope
from lineage_core.infra.models import Role
from portal.export_cli import export_cli
from portal.lineage_cli import lineage_cli

db_cli = click.Group("db", help="Database schema.")
org_cli = click.Group("org", help="Organizations.")
user_cli = click.Group("user", help="Users of the portal.")
local_cli = click.Group("local", help="The local demo (runs against a local AWS endpoint).")


def _database_url() -> str:
    return current_app.config["SETTINGS"].database_url  # type: ignore[no-any-return]


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration."""
    migrate.upgrade(_database_url())
    click.echo("Database schema is up to date.")


@org_cli.command("create")
@click.argument("slug")
@click.option("--name", help="Display name (defaults to the slug).")
def org_create(slug: str, name: str | None) -> None:
    """Create an organization identified by SLUG."""
    try:
        with session_scope(_database_url()) as session:
            create_organization(session, slug, name)
    except AccountError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Created organization {slug}.")


@user_cli.command("create")
@click.argument("email")
@click.option("--org", "org_slug", help="The organization of an org admin.")
@click.option(
    "--role",
    type=click.Choice([role.value for role in Role]),
    default=Role.ORG_ADMIN.value,
    show_default=True,
)
@click.password_option(help="Prompted for when not given (at least 12 characters).")
def user_create(email: str, org_slug: str | None, role: str, password: str) -> None:
    """Create a user who signs in with EMAIL."""
    try:
        with session_scope(_database_url()) as session:
            org = get_organization(session, org_slug) if org_slug else None
            create_user(session, email, password, Role(role), org)
    except AccountError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Created {role} {email.strip().lower()}.")


@local_cli.command("deploy-template")
@click.argument("template", type=click.File("r"))
@click.option("--stack-name", help="Defaults to FoundationalOpenLineageExport-<role name>.")
def local_deploy_template(template: TextIO, stack_name: str | None) -> None:
    """Deploy a downloaded TEMPLATE (YAML) to the local AWS endpoint, as Part 2 does in AWS."""
    settings = current_app.config["SETTINGS"]
    body = template.read()
    try:
        parsed = yaml.safe_load(body)
        role_name = parsed["Parameters"]["RoleName"]["Default"]
    except (yaml.YAMLError, KeyError, TypeError) as error:
        raise click.ClickException(
            f"{template.name} is not a template downloaded from the portal."
        ) from error
    try:
        arn = deploy_template(settings, body, stack_name or stack_name_for(str(role_name)))
    except LocalDeployError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Deployed. The stack created {arn}. Return to the portal and click Save.")


def init_app(app: Flask) -> None:
    for group in (db_cli, org_cli, user_cli, local_cli, lineage_cli, export_cli):
        app.cli.add_command(group)
