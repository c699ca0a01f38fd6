"""What a connector's card says, in words: one status, the last export, what is happening now.

The cards (the OpenLineage page, the Integrations page) and the card's live-status JSON render the
same :class:`CardView`, so a card that updates itself says exactly what a reload would.

The one status tells the truth about the connection, in this order:

* **Setup not finished**: a draft (never saved, or edited since and waiting for Save).
* **Paused**: an admin paused it.
* **Exporting** / **Export queued**: an export is running, or waiting for a worker.
* **Failing since …**: the last export failed (since the first failure after the last success).
* **Healthy**: the last export succeeded.
* **No export yet**: saved, nothing exported yet and nothing queued.

Below the status, :class:`RotationCard` says which External ID is in use and, during a rotation, what
the admin does next (update the stack, Save, update it again) and whether the old ID still works.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from lineage_core.infra.models import Connector, ConnectorStatus, ExportRun, RotationState, RunStatus
from lineage_core.setup import rotations
from lineage_core.setup.connectors import CardStatus

TIME = "%Y-%m-%d %H:%M UTC"


def when(moment: datetime | None) -> str:
    return moment.strftime(TIME) if moment else ""


def size_rule_note(run: ExportRun) -> str:
    """What the 300 KB rule did in a succeeded export (as the ``size_rule_note`` macro says it)."""
    parts = []
    if run.trimmed:
        noun = "event" if run.trimmed == 1 else "events"
        parts.append(f"{run.trimmed:,} {noun} written with less detail to stay under 300 KB")
    if run.omitted:
        noun = "job" if run.omitted == 1 else "jobs"
        parts.append(f"{run.omitted:,} {noun} left out: too large even as table-level lineage")
    return "; ".join(parts)


def checksum_note(run: ExportRun | None) -> str:
    """The succeeded export's checksum as a reader compares it, and why its tag is missing if it is."""
    if run is None or run.status is not RunStatus.SUCCEEDED or not run.checksum_crc64nvme:
        return ""
    note = f"Checksum (CRC64NVME): {run.checksum_crc64nvme}"
    return f"{note}. {run.tagging_error}" if run.tagging_error else note


@dataclass(frozen=True)
class CardView:
    state: str  # setup | paused | exporting | queued | failing | healthy | waiting
    label: str
    last_status: str | None  # succeeded | failed, or None before the first finished export
    last_text: str  # "Succeeded at …", "Failed at …", "No export yet"
    last_word: str  # "Succeeded", "Failed", or "" before the first finished export
    last_at: str  # its time, or ""
    last_error: str
    size_note: str
    checksum_note: str  # the last export's full-object checksum (and a missing event-count tag), or ""
    now: str  # "Export running since …", "Export queued", or ""
    next_export: str
    can_export_now: bool
    in_flight: bool

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def card_view(connector: Connector, card: CardStatus) -> CardView:
    run, flight = card.last_finished, card.in_flight
    if connector.status is ConnectorStatus.DRAFT:
        state, label = "setup", "Setup not finished"
    elif connector.status is ConnectorStatus.PAUSED:
        state, label = "paused", "Paused"
    elif flight is not None and flight.status is RunStatus.RUNNING:
        state, label = "exporting", "Exporting"
    elif flight is not None:
        state, label = "queued", "Export queued"
    elif run is not None and run.status is RunStatus.FAILED:
        state, label = "failing", f"Failing since {when(card.failing_since or run.finished_at)}"
    elif run is not None:
        state, label = "healthy", "Healthy"
    else:
        state, label = "waiting", "No export yet"

    if run is None:
        last_status, last_text, word, at = None, "No export yet", "", ""
    else:
        last_status = run.status.value
        word = "Succeeded" if run.status is RunStatus.SUCCEEDED else "Failed"
        at = when(run.finished_at)
        last_text = f"{word} at {at}"

    if flight is None:
        now = ""
    elif flight.status is RunStatus.RUNNING and flight.started_at is not None:
        now = f"Export running since {flight.started_at.strftime('%H:%M UTC')}"
    else:
        now = "Export queued"
    active = connector.status is ConnectorStatus.ACTIVE
    return CardView(
        state=state,
        label=label,
        last_status=last_status,
        last_text=last_text,
        last_word=word,
        last_at=at,
        last_error=(run.error or "") if run is not None else "",
        size_note=f"{size_rule_note(run)}." if run is not None and size_rule_note(run) else "",
        checksum_note=checksum_note(run),
        now=now,
        next_export=when(connector.next_export_at) if active and flight is None else "",
        can_export_now=active and flight is None,
        in_flight=flight is not None,
    )


@dataclass(frozen=True)
class RotationCard:
    """What the card says about the External ID and its rotation (lineage_core.setup.rotations)."""

    state: str  # none | pending | verified | complete
    message: str
    external_id: str  # the one exports use now
    new_external_id: str  # pending only, else ""
    old_external_id: str  # verified and complete, else ""
    old_check: str  # "Yes, checked at …", "No, checked at …", "Not checked yet", or "" without an old ID
    downloads: bool  # the stack must be updated: the card offers the downloads
    can_start: bool
    can_cancel: bool
    can_save: bool


def rotation_card(connector: Connector) -> RotationCard:
    view = rotations.rotation_view(connector)
    state = RotationState(view["state"])
    old_check = ""
    if view["oldExternalId"]:
        at = when(connector.old_external_id_checked_at)
        works = view["oldIdStillWorks"]
        old_check = "Not checked yet" if works is None else f"{'Yes' if works else 'No'}, checked at {at}"
    saved = connector.status is not ConnectorStatus.DRAFT
    return RotationCard(
        state=state.value,
        message=view["message"],
        external_id=view["externalId"],
        new_external_id=view["newExternalId"] or "",
        old_external_id=view["oldExternalId"] or "",
        old_check=old_check,
        downloads=state in (RotationState.PENDING, RotationState.VERIFIED),
        can_start=saved and state in (RotationState.NONE, RotationState.COMPLETE),
        can_cancel=state is RotationState.PENDING,
        can_save=state is RotationState.PENDING and connector.settings_complete,
    )
