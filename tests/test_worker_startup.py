"""What the worker does once before it takes jobs, so that each job's fork starts ready."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from lineage_core.infra.config import Settings
from lineage_core.infra.db import get_engine, session_factory
from lineage_core.infra.process import prepare_for_jobs


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()  # prepare_for_jobs froze the test process's objects: give them back to the collector


def test_the_engine_is_ready_and_holds_no_connection_a_fork_could_share(base_settings: Settings) -> None:
    prepare_for_jobs(base_settings)

    assert gc.get_freeze_count() > 0  # what is loaded now is out of the collector's way in every job
    engine = get_engine(base_settings.database_url)
    assert engine.dialect.server_version_info is not None  # initialised: no first-connect cost later
    assert engine.pool.checkedin() == 0 and engine.pool.checkedout() == 0

    child = os.fork()
    if child == 0:  # a job's fork: its own connection works
        ok = False
        try:
            with session_factory(base_settings.database_url)() as session:
                ok = session.execute(text("SELECT 1")).scalar_one() == 1
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_database_that_is_down_at_start_up_is_only_a_warning(
    base_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    down = dataclasses.replace(
        base_settings, database_url="postgresql+psycopg://nobody:secret-pw@127.0.0.1:1/none"
    )
    with caplog.at_level(logging.WARNING, logger="lineage_core.infra.process"):
        prepare_for_jobs(down)

    assert "database not reachable at start-up (OperationalError)" in caplog.text
    assert "secret-pw" not in caplog.text
