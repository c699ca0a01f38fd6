"""export runs' full-object checksum and the export object's missing tag

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

* ``export_runs.checksum_crc64nvme``: the export object's full-object CRC64NVME checksum (base64, 12
  characters), as S3 verified it on Complete and serves it to readers (HeadObject, GetObjectAttributes).
* ``export_runs.tagging_error``: why the object has no ``event-count`` tag (the role does not allow
  s3:PutObjectTagging, ...); NULL when it has.

Both are NULL for runs recorded before this revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("export_runs") as batch:
        batch.add_column(sa.Column("checksum_crc64nvme", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("tagging_error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("export_runs") as batch:
        batch.drop_column("tagging_error")
        batch.drop_column("checksum_crc64nvme")
