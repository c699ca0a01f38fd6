"""``flask --app portal org ...`` and ``user ...``: organizations and the people who sign in."""

from __future__ import annotations

import click
from flask.cli import AppGroup
from sqlalchemy.orm import Session

from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.organizations import create_organization, get_organization
from lineage_core.accounts.users import change_password, create_user, get_user, set_disabled
from lineage_core.infra.db import session_scope
from lineage_core.infra.models import Role
from lineage_core.ops.audit import Action, Actor, record
from portal.cli import current_settings

# The operator at a shell on one of our hosts: the trail says "cli".
CLI = Actor("cli")

org_cli = AppGroup("org", help="Organizations.")
user_cli = AppGroup("user", help="Users of the portal.")


@org_cli.command("create")
@click.argument("slug")
@click.option("--name", help="Display name (defaults to the slug).")
def org_create(slug: str, name: str | None) -> None:
    """Create an organization identified by SLUG."""
    try:
        with session_scope(current_settings().database_url) as session:
            org = create_organization(session, slug, name)
            record(
                session,
                Action.ORGANIZATION_CREATED,
                CLI,
                organization_id=org.id,
                target_type="organization",
                target_id=org.id,
                details={"slug": org.slug},
            )
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
            user = create_user(session, email, password, Role(role), org)
            _record_user(session, Action.USER_CREATED, user.id, user.organization_id, {"role": role})
    except AccountError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Created {role} {email.strip().lower()}.")


@user_cli.command("password")
@click.argument("email")
@click.password_option(help="Prompted for when not given (checked by the password policy).")
def user_password(email: str, password: str) -> None:
    """Set a new password for EMAIL; every session of the user ends."""
    try:
        with session_scope(current_settings().database_url) as session:
            user = get_user(session, email)
            change_password(session, user, password)
            _record_user(session, Action.USER_PASSWORD_CHANGED, user.id, user.organization_id)
    except AccountError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"New password set for {email.strip().lower()}; their sessions ended.")


@user_cli.command("disable")
@click.argument("email")
def user_disable(email: str) -> None:
    """Disable EMAIL: they cannot sign in, and every session of theirs ends at once."""
    _set_disabled(email, True)


@user_cli.command("enable")
@click.argument("email")
def user_enable(email: str) -> None:
    """Let a disabled EMAIL sign in again."""
    _set_disabled(email, False)


def _set_disabled(email: str, disabled: bool) -> None:
    try:
        with session_scope(current_settings().database_url) as session:
            user = get_user(session, email)
            if set_disabled(session, user, disabled):
                action = Action.USER_DISABLED if disabled else Action.USER_ENABLED
                _record_user(session, action, user.id, user.organization_id)
    except AccountError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"{email.strip().lower()} is {'disabled' if disabled else 'enabled'}.")


def _record_user(
    session: Session, action: Action, user_id: int, org_id: int | None, details: dict[str, str] | None = None
) -> None:
    record(
        session, action, CLI, organization_id=org_id, target_type="user", target_id=user_id, details=details
    )
