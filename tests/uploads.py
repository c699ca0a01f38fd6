"""The multipart uploads an export recorded (``export_uploads``), as tests set them up and read them back."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.infra.models import ExportRun, ExportUpload, UploadState, utcnow
from lineage_core.setup.destination import export_key


def add_pending_upload(db: Session, run: ExportRun, upload_id: str, owner: str | None = None) -> ExportUpload:
    """An upload the run opened and nobody completed or aborted (a killed worker's, a failed abort's)."""
    connector = run.connector
    assert connector.bucket is not None
    row = ExportUpload(
        run_id=run.id,
        connector_id=run.connector_id,
        owner=owner,
        upload_id=upload_id,
        bucket=connector.bucket,
        object_key=export_key(connector.prefix),
        state=UploadState.OPEN,
        opened_at=utcnow(),
    )
    db.add(row)
    db.commit()
    return row


def uploads_of(db: Session, run_id: int) -> dict[str, UploadState]:
    """The run's uploads: UploadId → what became of it, read fresh from the database."""
    db.expire_all()
    rows = db.execute(select(ExportUpload.upload_id, ExportUpload.state).where(ExportUpload.run_id == run_id))
    result = {upload_id: state for upload_id, state in rows}
    db.rollback()
    return result


def pending_upload_ids(db: Session, run_id: int) -> list[str]:
    """The run's uploads still open (or stuck completing) as far as the database knows."""
    return sorted(
        upload_id
        for upload_id, state in uploads_of(db, run_id).items()
        if state in (UploadState.OPEN, UploadState.COMPLETING)
    )
