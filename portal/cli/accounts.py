"""``flask --app portal org ...`` and ``user ...``: organizations and the people who sign in."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.organizations import create_organization, get_organization
from lineage_core.accounts.users import create_user
from lineage_core.infra.db import session_scope
from lineage_core.infra.models import Role
from portal.cli import current_settings

org_cli = AppGroup("org", help="Organizations.")
user_cli = AppGroup("user", help="Users of the portal.")


@org_cli.command("create")
@click.argument("slug")
@click.option("--name", help="Display name (defaults to the slug).")
def org_create(slug: str, name: str | None) -> None:
    """Create an organization identified by SLUG."""
    try:
        with session_scope(current_settings().database_url) as session:
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
        with session_scope(current_settings().database_url) as session:
            org = get_organization(session, org_slug) if org_slug else None
            create_user(session, email, password, Role(role), org)
    except AccountError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Created {role} {email.strip().lower()}.")
