"""Periodic jobs run by the scheduler process. Each is a thin call into lineage_core."""

from __future__ import annotations

from dataclasses import asdict

from lineage_core.infra.config import Settings
from lineage_core.schedule.tick import run_tick


def enqueue_due_exports() -> dict[str, int]:
    """The schedule's tick (see lineage_core.schedule.tick)."""
    return asdict(run_tick(Settings.from_env()))
