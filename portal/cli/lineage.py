"""``flask --app portal lineage ...``: import files of OpenLineage events, generate synthetic lineage,
derive column lineage from SQL."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import click
import orjson
from flask.cli import AppGroup
from sqlalchemy.orm import Session

from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.organizations import get_organization
from lineage_core.demo.synthetic import iter_synthetic_events
from lineage_core.infra.db import get_engine, session_scope
from lineage_core.lineage.derivation_status import derivation_problems
from lineage_core.lineage.derivations import derive_organization
from lineage_core.lineage.event import Event
from lineage_core.lineage.importer import (
    DEFAULT_BATCH_EVENTS,
    DEFAULT_MAX_EVENT_BYTES,
    ImportReport,
    Reject,
    import_events,
)
from lineage_core.lineage.ingest import StoreResult, store_batch
from lineage_core.lineage.merge import ApplyResult, LineageOutcome
from lineage_core.lineage.parallel_import import WorkerDiedError, import_events_in_parallel
from lineage_core.lineage.parse import check_event
from portal.cli import current_settings

# Two processes keep two cores busy with the database on the same machine (bench_ingest); more only
# help where the database runs elsewhere.
DEFAULT_IMPORT_WORKERS = 2
MAX_IMPORT_WORKERS = 32
MAX_BATCH_EVENTS = 10_000  # the batch endpoint's ceiling

lineage_cli = AppGroup(
    "lineage", help="Each organization's lineage graph: import and generate events, derive from SQL."
)


def _database_url() -> str:
    return current_settings().database_url


def _organization_id(slug: str) -> int:
    try:
        with session_scope(_database_url()) as session:
            return get_organization(session, slug).id
    except AccountError as error:
        raise click.ClickException(f"{error} Create it with: flask --app portal org create {slug}") from error


@contextmanager
def _one_connection_session() -> Iterator[Session]:
    """A session that keeps one connection for all its transactions (no pool checkout per event)."""
    with get_engine(_database_url()).connect() as connection:
        session = Session(bind=connection, expire_on_commit=False)
        try:
            yield session
        finally:
            session.close()


def _summary(report: ImportReport) -> str:
    outcomes = ", ".join(f"{count} {outcome.value}" for outcome, count in sorted(report.lineage.items()))
    return f"{report.lines} events: {report.stored} stored, {report.rejected} rejected." + (
        f" Job lineage: {outcomes}." if outcomes else ""
    )


@lineage_cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--org", "org_slug", required=True, help="Slug of the organization whose graph receives the events."
)
@click.option(
    "--max-event-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_EVENT_BYTES,
    show_default=True,
    help="Longer lines are rejected.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_IMPORT_WORKERS),
    default=DEFAULT_IMPORT_WORKERS,
    show_default=True,
    help="Processes that check and store batches at once (1: this process alone; SQLite: always 1).",
)
@click.option(
    "--batch-events",
    type=click.IntRange(min=1, max=MAX_BATCH_EVENTS),
    default=DEFAULT_BATCH_EVENTS,
    show_default=True,
    help="Events stored per transaction.",
)
def import_command(file: str, org_slug: str, max_event_bytes: int, workers: int, batch_events: int) -> None:
    """Import FILE, one OpenLineage event per line ('-' for standard input).

    Each rejected line is reported on standard output with its line number, the field and the problem,
    in line order; the exit status is 1 if any line was rejected. Importing the same file again changes
    nothing.
    """
    organization_id = _organization_id(org_slug)
    stream: BinaryIO
    if file == "-":
        stream, size = sys.stdin.buffer, None
    else:
        stream, size = open(file, "rb"), os.path.getsize(file)  # noqa: SIM115 - closed below

    def report_reject(reject: Reject) -> None:
        click.echo(reject.describe())

    try:
        with click.progressbar(length=size, label="Importing", file=sys.stderr, show_pos=False) as bar:  # type: ignore[var-annotated]  # a length, no items: nothing for the item type to be
            options: dict[str, Any] = {
                "max_event_bytes": max_event_bytes,
                "batch_events": batch_events,
                "on_progress": bar.update,
                "on_reject": report_reject,
            }
            if workers > 1 and not _database_url().startswith("sqlite"):
                # SQLite has one writer at a time: processes would only queue for it.
                report = import_events_in_parallel(
                    _database_url(), organization_id, stream, workers=workers, **options
                )
            else:
                with _one_connection_session() as session:
                    report = import_events(session, organization_id, stream, **options)
    except WorkerDiedError as error:
        raise click.ClickException(str(error)) from error
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    click.echo(f"Imported {file} into {org_slug}: {_summary(report)}", err=True)
    if report.rejected:
        raise click.exceptions.Exit(1)


@lineage_cli.command("generate")
@click.option("--org", "org_slug", help="Store the events into this organization's graph.")
@click.option("--jobs", type=click.IntRange(min=1), required=True, help="Number of jobs (one event each).")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same organization.")
@click.option(
    "--output",
    "-o",
    type=click.File("wb"),
    help="Write the events to this NDJSON file ('-': standard output) instead of storing them.",
)
def generate_command(org_slug: str | None, jobs: int, seed: int, output: BinaryIO | None) -> None:
    """Generate a realistic synthetic lineage graph of JOBS jobs.

    Jobs with SQL, datasets with typed and described fields in postgres://, s3://, snowflake:// and
    bigquery namespaces, column lineage with subtypes and explanations, multi-hop chains. Running it
    again with the same seed changes nothing.
    """
    events = iter_synthetic_events(jobs, seed)
    if output is not None:
        for event in events:
            output.write(orjson.dumps(event) + b"\n")
        return
    if not org_slug:
        raise click.UsageError("Give --org to store the events, or --output to write them to a file.")
    organization_id = _organization_id(org_slug)
    replaced = 0
    with (
        _one_connection_session() as session,
        click.progressbar(events, length=jobs, label="Generating", file=sys.stderr) as bar,
    ):
        pending: list[Event] = []
        for event in bar:
            pending.append(check_event(event))
            if len(pending) == DEFAULT_BATCH_EVENTS:
                replaced += _replaced(store_batch(session, organization_id, pending))
                pending = []
        if pending:
            replaced += _replaced(store_batch(session, organization_id, pending))
    click.echo(f"Generated {jobs} jobs into {org_slug} (seed {seed}); {replaced} jobs' lineage written.")


def _replaced(results: list[StoreResult]) -> int:
    return sum(isinstance(r, ApplyResult) and r.lineage is LineageOutcome.REPLACED for r in results)


@lineage_cli.command("derive")
@click.option("--org", "org_slug", required=True, help="The organization whose lineage to derive.")
@click.option("--force", is_flag=True, help="Derive every job with SQL, even those that did not change.")
@click.option(
    "--max-problems",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="How many jobs' problems to list.",
)
def derive_command(org_slug: str, force: bool, max_problems: int) -> None:
    """Derive column lineage and explanations from the jobs' SQL, now.

    Every job of the organization with a SQL facet whose SQL, datasets or schemas changed since it
    was last derived (or every such job, with --force). The workers do the same on their own within a
    few minutes of ingest; this command is how tools and tests wait for it. Lists the jobs whose SQL
    could not be derived in full, and why.
    """
    organization_id = _organization_id(org_slug)
    with _one_connection_session() as session:
        report = derive_organization(session, organization_id, force=force)
        problems = derivation_problems(session, organization_id, limit=max_problems)
    click.echo(
        f"Derived {report.derived} of {report.jobs_with_sql} jobs with SQL in {org_slug} "
        f"({report.partial} partial, {report.failed} failed; {report.unchanged} unchanged): "
        f"{report.edges} column-lineage edges written."
    )
    for problem in problems:
        reasons = list(problem.problems)
        if problem.unmatched_tables:
            reasons.append(
                "Tables that match none of the job's datasets: " + ", ".join(problem.unmatched_tables)
            )
        click.echo(f"  {problem.status} {problem.namespace}/{problem.name}: " + " ".join(reasons), err=True)
