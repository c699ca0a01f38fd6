"""The migrations build exactly the tables the models describe, on PostgreSQL and on SQLite."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from lineage_core.infra.config import Settings
from lineage_core.infra.db import Base, get_engine


def _differences(database_url: str) -> list[object]:
    with get_engine(database_url).connect() as connection:
        return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))


def test_postgresql_schema_matches_the_models(base_settings: Settings) -> None:
    # The session's database was built by `migrate.upgrade`, as production's is.
    assert _differences(base_settings.database_url) == []


def test_sqlite_schema_matches_the_models(sqlite_settings: Settings) -> None:
    # Migrated to the head revision by the fixture.
    assert _differences(sqlite_settings.database_url) == []
