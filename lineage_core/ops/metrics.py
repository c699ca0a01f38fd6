"""Prometheus metrics, computed from the database and Redis at scrape time.

The database holds every run, so the figures are right whichever web process is scraped and survive
restarts (no per-process counters to lose or sum).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError
from rq import Queue
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lineage_core.export.queue import redis_connection
from lineage_core.infra.config import Settings
from lineage_core.infra.models import Connector, ExportRun, RunStatus, utcnow
from lineage_core.lineage.derivation_status import derivation_counts
from lineage_core.lineage.models import LineageColumnLineage, LineageDataset, LineageJob
from lineage_core.ops.heartbeats import tick_health


class ServiceCollector(Collector):
    def __init__(self, session: Session, settings: Settings) -> None:
        self._session = session
        self._settings = settings

    def collect(self) -> Iterator[Metric]:
        yield from self._exports()
        yield from self._connectors()
        yield from self._queues()
        yield from self._lineage()
        yield from self._derivations()
        yield from self._schedule()

    def _exports(self) -> Iterator[Metric]:
        runs = CounterMetricFamily("olx_export_runs", "Export runs by status.", labels=["status"])
        counts = dict(
            self._session.execute(select(ExportRun.status, func.count()).group_by(ExportRun.status)).all()
        )
        for status in RunStatus:
            runs.add_metric([status.value], counts.get(status, 0))
        yield runs

        succeeded = select(ExportRun).where(ExportRun.status == RunStatus.SUCCEEDED).subquery()
        total_bytes, total_events, count = self._session.execute(
            select(
                func.coalesce(func.sum(succeeded.c.bytes), 0),
                func.coalesce(func.sum(succeeded.c.events), 0),
                func.count(),
            )
        ).one()
        yield CounterMetricFamily(
            "olx_export_bytes", "Bytes written by successful exports.", value=total_bytes
        )
        yield CounterMetricFamily(
            "olx_export_events", "Events written by successful exports.", value=total_events
        )
        durations = [
            (finished - started).total_seconds()
            for started, finished in self._session.execute(
                select(ExportRun.started_at, ExportRun.finished_at)
                .where(ExportRun.status == RunStatus.SUCCEEDED, ExportRun.started_at.is_not(None))
                .order_by(ExportRun.finished_at.desc())
                .limit(1000)
            )
            if started and finished
        ]
        duration = GaugeMetricFamily(
            "olx_export_duration_seconds",
            "Duration of recent successful exports (last 1000).",
            labels=["stat"],
        )
        if durations:
            duration.add_metric(["max"], max(durations))
            duration.add_metric(["mean"], sum(durations) / len(durations))
        yield duration
        yield GaugeMetricFamily("olx_export_succeeded_runs", "Successful export runs.", value=count)

    def _schedule(self) -> Iterator[Metric]:
        """When the schedule's tick last ran, from the database: a lost tick (Redis flushed, scheduler
        down) shows as a growing age. +Inf when no tick was ever recorded."""
        health = tick_health(self._session)
        age = health.age_seconds if health.age_seconds is not None else math.inf
        yield GaugeMetricFamily(
            "olx_last_tick_age_seconds", "Seconds since the schedule's tick last ran.", value=age
        )
        if health.last_at is not None:
            yield GaugeMetricFamily(
                "olx_last_tick_timestamp_seconds",
                "When the schedule's tick last ran (Unix time).",
                value=health.last_at.timestamp(),
            )
        leased = GaugeMetricFamily(
            "olx_export_runs_running", "Running export runs by the state of their lease.", labels=["lease"]
        )
        now = utcnow()
        live = self._session.scalar(
            select(func.count())
            .select_from(ExportRun)
            .where(ExportRun.status == RunStatus.RUNNING, ExportRun.lease_expires_at >= now)
        )
        running = self._session.scalar(
            select(func.count()).select_from(ExportRun).where(ExportRun.status == RunStatus.RUNNING)
        )
        leased.add_metric(["live"], live or 0)
        leased.add_metric(["expired"], (running or 0) - (live or 0))
        yield leased

    def _connectors(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("olx_connectors", "Connectors by status.", labels=["status"])
        for status, count in self._session.execute(
            select(Connector.status, func.count()).group_by(Connector.status)
        ):
            gauge.add_metric([status.value], count)
        yield gauge

    def _queues(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("olx_queue_depth", "Jobs waiting in each RQ queue.", labels=["queue"])
        up = GaugeMetricFamily("olx_redis_up", "1 when Redis answered the scrape.")
        connection = redis_connection(self._settings)
        try:
            for name in (
                self._settings.schedule_queue,
                self._settings.derive_queue,
                self._settings.export_queue,
            ):
                depth.add_metric([name], Queue(name, connection=connection).count)
            up.add_metric([], 1)
        except RedisError:
            up.add_metric([], 0)
        finally:
            connection.close()
        yield depth
        yield up

    def _derivations(self) -> Iterator[Metric]:
        """Column lineage derived from SQL: jobs by outcome (``waiting``: not derived yet)."""
        gauge = GaugeMetricFamily(
            "olx_lineage_derivations",
            "Jobs with SQL by the outcome of deriving their column lineage.",
            labels=["status"],
        )
        counts = derivation_counts(self._session)
        for status in ("derived", "partial", "failed", "waiting"):
            gauge.add_metric([status], getattr(counts, status))
        yield gauge

    def _lineage(self) -> Iterator[Metric]:
        """What ingest has built: the size of the stored graphs, across organizations."""
        for name, model, help_text in (
            ("olx_lineage_jobs", LineageJob, "Jobs in the lineage store."),
            ("olx_lineage_datasets", LineageDataset, "Datasets in the lineage store."),
            ("olx_lineage_column_edges", LineageColumnLineage, "Column-lineage edges in the lineage store."),
        ):
            yield GaugeMetricFamily(
                name, help_text, value=self._session.scalar(select(func.count()).select_from(model))
            )
