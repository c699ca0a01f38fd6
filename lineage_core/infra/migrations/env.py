"""Alembic environment: runs the migrations against the database URL of the config, if it has one.

:mod:`lineage_core.infra.migrate` (the CLI, the local launcher, the tests) puts the URL in the config.
The ``alembic`` command with the repository's ``alembic.ini``, which names no URL, uses
``DATABASE_URL``, else the processes' default ``sqlite:///instance/portal.db``.
"""

from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool

import lineage_core.infra.all_models  # noqa: F401  (registers every table on Base.metadata)
from lineage_core.infra.db import Base
from lineage_core.infra.migrate import ensure_sqlite_folder, url_from_environment

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None:
    # The alembic command: its logging sections. From code, the caller's logging stays as it is.
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    return config.get_main_option("sqlalchemy.url") or url_from_environment()


def run_migrations_offline() -> None:
    """``alembic upgrade --sql``: the SQL of the migrations, written out rather than run."""
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = database_url()
    ensure_sqlite_folder(url)
    connectable = create_engine(url, poolclass=pool.NullPool)
    with connectable.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
