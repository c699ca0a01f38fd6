"""A real constraint of the database that the event checks do not know of, for the tests of what the
store does when PostgreSQL refuses one event: a trigger that refuses to create a job of a given name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from lineage_core.infra.db import get_engine

POISON = "poison"


@contextmanager
def refusing_jobs_named_poison(database_url: str) -> Iterator[None]:
    """While open, PostgreSQL refuses (check_violation, "no poison jobs") any job called ``poison``."""
    engine = get_engine(database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "CREATE FUNCTION test_refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF NEW.name = '{POISON}' THEN "
                "RAISE EXCEPTION 'no poison jobs' USING ERRCODE = 'check_violation'; "
                "END IF; RETURN NEW; END $$"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER test_refuse_poison BEFORE INSERT ON lineage_jobs "
                "FOR EACH ROW EXECUTE FUNCTION test_refuse_poison()"
            )
        )
    try:
        yield
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TRIGGER test_refuse_poison ON lineage_jobs"))
            conn.execute(text("DROP FUNCTION test_refuse_poison()"))
