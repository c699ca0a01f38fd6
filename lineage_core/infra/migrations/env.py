"""Alembic environment: runs migrations against the URL the caller put in the config."""

from alembic import context
from sqlalchemy import engine_from_config, pool

import lineage_core.infra.all_models  # noqa: F401  (registers every table on Base.metadata)
from lineage_core.infra.db import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connectable = engine_from_config(
        config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.", poolclass=pool.NullPool
    )
    with connectable.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
