"""RQ jobs, enqueued by dotted path (``worker.jobs.export_connector``). Each is a thin call into lineage_core.

``export_connector`` is enqueued per run by :mod:`lineage_core.export.queue`; ``enqueue_due_exports``
is the schedule's tick, a periodic job of :mod:`worker.periodic_jobs`.

Nothing happens at import time: settings are read and connections opened when a job runs, in the
work-horse process that runs it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rq import get_current_job

from lineage_core.export.run import ExportError, TransientExportError, run_export
from lineage_core.infra.config import Settings
from lineage_core.lineage import derivation_schedule
from lineage_core.schedule.tick import run_tick


def export_connector(run_id: int) -> dict[str, Any] | None:
    """Run the export of run ``run_id`` (see :func:`lineage_core.export.run.run_export`).

    Returns:
        The export's result (events, bytes, ETag, version, trimmed/omitted events), or None when the
        run was no longer queued and nothing was done.

    Raises:
        lineage_core.export.run.ExportError: the export failed (the run is recorded as failed); a
            ``TransientExportError`` when a retry soon is likely to succeed.
    """
    job = get_current_job()
    retry_pending = bool(job is not None and job.retries_left)
    try:
        result = run_export(Settings.from_env(), run_id, retry_pending=retry_pending)
    except TransientExportError:
        raise  # RQ retries it after the backoff of EXPORT_RETRY, if any retry is left
    except ExportError:
        if job is not None:
            job.retries_left = 0  # the admin must change something: retrying now would fail the same way
        raise
    return None if result is None else result.as_dict()


def derive_lineage(organization_id: int) -> dict[str, int]:
    """Derive the organization's column lineage from its jobs' SQL where it changed.

    See :func:`lineage_core.lineage.derivation_schedule.derive_organization_now`.
    """
    return derivation_schedule.derive_organization_now(Settings.from_env(), organization_id).as_dict()


def enqueue_due_derivations() -> dict[str, int]:
    """Enqueue a derivation for every organization whose graph changed since its last one."""
    return {"enqueued": derivation_schedule.enqueue_due_derivations(Settings.from_env())}


def enqueue_due_exports() -> dict[str, int]:
    """The schedule's tick (see :mod:`lineage_core.schedule.tick`)."""
    return asdict(run_tick(Settings.from_env()))
