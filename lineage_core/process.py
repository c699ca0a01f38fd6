"""Start-up shared by the product's long-running processes (worker, scheduler)."""

from __future__ import annotations

import logging
import sys

from lineage_core.config import ConfigError, Settings


def start_process(name: str) -> Settings:
    """Configure logging and read the settings; exit with status 2 and the reason if they are wrong."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return Settings.from_env()
    except ConfigError as error:
        print(f"{name}: {error}", file=sys.stderr)
        raise SystemExit(2) from error
