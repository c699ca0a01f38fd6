"""``flask --app portal db ...``: the database schema."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from lineage_core.infra import migrate
from portal.cli import current_settings

db_cli = AppGroup("db", help="Database schema.")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration."""
    migrate.upgrade(current_settings().database_url)
    click.echo("Database schema is up to date.")
