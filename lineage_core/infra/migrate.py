"""Apply the Alembic migrations from code, for the CLI, the local launcher and the tests.

The same migrations also run from the ``alembic`` command with the repository's ``alembic.ini`` (for
``alembic revision --autogenerate``); there the URL comes from :func:`url_from_environment`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from alembic import command
from alembic.config import Config

from lineage_core.infra.config import DEFAULT_DATABASE_URL

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation treats '%' specially; URLs may contain percent-escapes.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def url_from_environment(env: Mapping[str, str] | None = None) -> str:
    """``DATABASE_URL`` as the processes read it (default ``sqlite:///instance/portal.db``).

    A plain ``postgresql://`` URL gets the psycopg 3 driver we ship, as in :class:`Settings`; no other
    setting is needed, so ``alembic`` runs without ``SECRET_KEY`` and the rest.
    """
    url = (os.environ if env is None else env).get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def ensure_sqlite_folder(database_url: str) -> None:
    """Create the folder of a SQLite file URL's database file if it does not exist yet."""
    if database_url.startswith("sqlite:///") and not database_url.startswith("sqlite:///:memory:"):
        Path(database_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema at ``database_url`` to ``revision``; creates a SQLite file's folder if needed."""
    ensure_sqlite_folder(database_url)
    command.upgrade(alembic_config(database_url), revision)
