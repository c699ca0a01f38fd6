"""When periodic parts of the service last did their work, kept in the database.

The schedule's tick records itself here each time it runs (:data:`TICK`). Whatever happens to Redis or
to the scheduler process, a tick that stops coming shows: /healthz, /ops/ and ``/metrics``
(``olx_last_tick_age_seconds``) read the time back and call the schedule late after :data:`TICK_LATE_AFTER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import literal, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lineage_core.infra.models import ServiceHeartbeat, utcnow

TICK = "tick"
# The tick comes every 5 minutes: three missed in a row is no accident.
TICK_LATE_AFTER = timedelta(minutes=15)


def record_beat(session: Session, name: str, detail: str | None = None, at: datetime | None = None) -> None:
    """Note that ``name`` ran now (or ``at``). Commits. Concurrent callers are fine: one upsert each."""
    at = at or utcnow()
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = insert(ServiceHeartbeat).values(name=name, at=at, detail=detail)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["name"], set_={"at": statement.excluded.at, "detail": statement.excluded.detail}
        )
    )
    session.commit()


@dataclass(frozen=True)
class TickHealth:
    last_at: datetime | None
    age_seconds: float | None  # None: no tick recorded yet
    late: bool

    @property
    def sentence(self) -> str:
        if self.last_at is None:
            return "no tick recorded yet"
        minutes = int((self.age_seconds or 0) // 60)
        return f"last tick at {self.last_at:%Y-%m-%d %H:%M:%S} UTC ({minutes} min ago)"


def tick_health(session: Session, now: datetime | None = None) -> TickHealth:
    now = now or utcnow()
    last = session.scalar(select(ServiceHeartbeat.at).where(ServiceHeartbeat.name == literal(TICK)))
    if last is None:
        return TickHealth(None, None, True)
    age = max((now - last).total_seconds(), 0.0)
    return TickHealth(last, age, age > TICK_LATE_AFTER.total_seconds())


__all__ = ["TICK", "TICK_LATE_AFTER", "TickHealth", "record_beat", "tick_health"]
