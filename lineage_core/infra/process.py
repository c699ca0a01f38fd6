"""Start-up shared by the product's long-running processes (web workers, worker, scheduler, import)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import sys

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import configure_mappers

from lineage_core.infra import aws, db
from lineage_core.infra.config import ConfigError, Settings
from lineage_core.infra.logs import configure_json_logging

logger = logging.getLogger(__name__)

# Allocations between two young-generation collections (CPython's default is 700). A batch of 1000
# events builds millions of objects, almost none in reference cycles; at 700 the collector ran thousands
# of times per batch and each survivor was scanned again in the older generations: measured, 0.37 ms of
# CPU per event to parse and fingerprint a batch in a web worker against 0.23 ms with the start-up
# objects frozen and this threshold (0.21 with no collector at all). Cycles are still collected.
YOUNG_GENERATION_THRESHOLD = 10_000
# The malloc arenas a web worker keeps (glibc's default: eight per core). Each thread that allocates
# while another holds an arena gets one of its own, and an arena keeps the memory of the largest batch
# it ever parsed: four 1,000-event batches at once in one 4-thread worker peaked at 362 MB with the
# default arenas, 326 MB with two (LINEAGE_BATCH_CONCURRENCY 2, bench_ingest), at the same speed.
WEB_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


def start_process(name: str) -> Settings:
    """Configure logging (JSON lines) and read the settings; exit with status 2 and the reason if they
    are wrong."""
    configure_json_logging(logging.INFO)
    try:
        return Settings.from_env()
    except ConfigError as error:
        print(f"{name}: {error}", file=sys.stderr)
        raise SystemExit(2) from error


def prepare_for_jobs(settings: Settings) -> None:
    """What every export would otherwise redo: load the AWS models, set up the ORM's mappers and
    initialise the database engine.

    RQ runs each job in a fork of the worker, so what is loaded here before the worker starts is
    inherited by every job (about 0.2 s per export), then frozen out of the garbage collector's way. A
    database that is not up yet is not an error here: the jobs report it when they run.
    """
    aws.preload_models(settings)
    configure_mappers()  # done lazily at a process's first ORM query otherwise
    try:
        db.warm_engine(settings.database_url)
    except SQLAlchemyError as error:
        logger.warning(
            "database not reachable at start-up (%s); jobs will connect when they run", type(error).__name__
        )
    settle_garbage_collector()


def limit_malloc_arenas(arenas: int = WEB_MALLOC_ARENAS) -> bool:
    """Keep at most ``arenas`` malloc arenas (glibc's ``mallopt(M_ARENA_MAX)``); True if set.

    Not set when ``MALLOC_ARENA_MAX`` or the ``glibc.malloc.arena_max`` tunable is in the environment
    (glibc read it at start-up: the operator's choice stands), nor with another C library (its
    allocator has its own policy).
    """
    if "MALLOC_ARENA_MAX" in os.environ or "glibc.malloc.arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def settle_garbage_collector() -> None:
    """Call once start-up is done: the objects made so far leave the collector's way, and it runs less.

    Everything loaded so far (modules, the app, the AWS models: hundreds of thousands of objects) lives
    as long as the process; frozen, the collector's full collections skip it. The higher young-generation
    threshold is :data:`YOUNG_GENERATION_THRESHOLD`'s.
    """
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)
