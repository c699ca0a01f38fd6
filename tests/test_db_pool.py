"""The engine pings a pooled connection only after it sat idle (lineage_core.infra.db._ping_if_idle)."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from lineage_core.infra import db as db_module
from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine


def _backend_pid(settings: Settings) -> int:
    with get_engine(settings.database_url).connect() as connection:
        pid = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        connection.commit()
    return int(pid)


def _terminate(settings: Settings, pid: int) -> None:
    """Ends one backend of this run's own throwaway database, as a database restart would."""
    url = settings.database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_an_idle_connection_that_died_is_replaced_before_use(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    get_engine(settings.database_url).dispose()
    dead = _backend_pid(settings)
    _terminate(settings, dead)
    monkeypatch.setattr(db_module, "PING_AFTER_IDLE_SECONDS", 0.0)  # it has been idle "long enough"
    assert _backend_pid(settings) != dead


def test_a_connection_back_in_the_pool_moments_ago_is_used_without_a_ping(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    get_engine(settings.database_url).dispose()
    dead = _backend_pid(settings)
    _terminate(settings, dead)
    monkeypatch.setattr(db_module, "PING_AFTER_IDLE_SECONDS", 3600.0)
    # Not pinged, so the dead connection is used and fails; the pool then drops it and every older one.
    with pytest.raises(OperationalError):
        _backend_pid(settings)
    assert _backend_pid(settings) != dead
