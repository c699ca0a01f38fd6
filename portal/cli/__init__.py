"""Operator commands: ``flask --app portal <group> <command>``, one module per command group."""

from __future__ import annotations

from flask import Flask, current_app

from lineage_core.infra.config import Settings


def current_settings() -> Settings:
    """The settings of the app the command runs in (the same environment as every process)."""
    return current_app.config["SETTINGS"]  # type: ignore[no-any-return]


def init_app(app: Flask) -> None:
    from portal.cli.accounts import org_cli, user_cli
    from portal.cli.db import db_cli
    from portal.cli.export import export_cli
    from portal.cli.lineage import lineage_cli
    from portal.cli.local import local_cli

    for group in (db_cli, org_cli, user_cli, local_cli, lineage_cli, export_cli):
        app.cli.add_command(group)
