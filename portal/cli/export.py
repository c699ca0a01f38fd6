"""``flask --app portal export ...``: the snapshot export, run by hand.

``export write --org ORG --out FILE`` writes exactly what an export would put in
``openlineage-events.jsonl`` (same events, same shape, same size rule) to a local file, or to standard
output with ``--out -``, for debugging and for testing readers' tooling. Nothing is sent to AWS.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import click
from flask.cli import AppGroup

from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.organizations import get_organization
from lineage_core.export.events import EventWriter
from lineage_core.export.snapshot import snapshot_session, write_snapshot_lines
from lineage_core.infra.db import session_scope
from lineage_core.infra.models import utcnow
from portal.cli import current_settings

export_cli = AppGroup("export", help="OpenLineage snapshot exports.")


@export_cli.command("write")
@click.option("--org", "org_slug", required=True, help="The organization's slug.")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True, path_type=str),
    help="The file to write (replaced whole at the end), or - for standard output.",
)
def export_write(org_slug: str, out: str) -> None:
    """Write the organization's current lineage as OpenLineage NDJSON, one RunEvent per job."""
    settings = current_settings()
    try:
        with session_scope(settings.database_url) as session:
            organization_id = get_organization(session, org_slug).id
    except AccountError as error:
        raise click.ClickException(str(error)) from error

    writer = EventWriter(utcnow())
    with snapshot_session(settings.database_url) as session:
        lines = write_snapshot_lines(session, organization_id, writer)
        if out == "-":
            with click.open_file("-", "wb") as stdout:
                size = _copy(lines, stdout)
        else:
            size = _write_file_atomically(Path(out), lines)

    stats = writer.stats
    summary = f"Wrote {stats.events} events ({size} bytes) of organization {org_slug} to {out}."
    if stats.trimmed:
        summary += f" {stats.trimmed} events were written with less detail to stay under 300 KB."
    if stats.omitted:
        summary += (
            f" {stats.omitted} jobs were left out: even their table-level event is over 300 KB"
            f" ({', '.join(stats.omitted_jobs)})."
        )
    # On stderr, so that `--out -` leaves nothing but NDJSON on stdout.
    click.echo(summary, err=True)


def _copy(lines: Iterable[bytes], sink: IO[bytes]) -> int:
    size = 0
    for line in lines:
        sink.write(line)
        size += len(line)
    sink.flush()
    return size


def _write_file_atomically(path: Path, lines: Iterable[bytes]) -> int:
    """Write to a temporary file next to ``path``, then rename it over ``path``.

    Like the export in S3, a reader of ``path`` sees the previous file or the new one, never a part.
    """
    directory = path.parent if str(path.parent) else Path()
    if not directory.is_dir():
        raise click.ClickException(f"The folder {directory} does not exist.")
    temporary: Path | None = None
    try:
        with tempfile.NamedTemporaryFile(
            dir=directory, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as handle:
            temporary = Path(handle.name)
            size = _copy(lines, handle)
        # NamedTemporaryFile creates the file 0600; give it the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        temporary.chmod(0o666 & ~umask)
        temporary.replace(path)
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise
    return size
