"""``openlineage-export-web``: the portal served by gunicorn, as the Procfile's ``web`` line serves it.

Same options as that line: bound to ``127.0.0.1:$PORTAL_PORT`` (8000), ``$WEB_CONCURRENCY`` workers
(2) of ``$WEB_THREADS`` threads each (4: gunicorn's gthread workers), access log on standard output,
no control socket. Threads let one worker serve several producers at once, and the single-event
endpoint's concurrent requests share a transaction (:mod:`lineage_core.lineage.group_commit`). The
settings are read once, before gunicorn starts, so a malformed variable stops the process with one line
naming it (exit status 2) instead of every worker failing to boot.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]

from lineage_core.infra.config import ConfigError, Settings

DEFAULT_PORT = 8000
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 4


def _positive_int(env: Mapping[str, str], name: str, default: int, maximum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    # ASCII digits only: str.isdigit() also accepts other scripts' digits (and int() reads them).
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= maximum:
        raise ConfigError(f"{name} must be a whole number from 1 to {maximum}; got {raw!r}.")
    return int(raw)


def gunicorn_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The gunicorn settings of the web process, from ``PORTAL_PORT``, ``WEB_CONCURRENCY`` and
    ``WEB_THREADS``.

    Raises:
        ConfigError: one of them is not a whole number in range.
    """
    env = os.environ if env is None else env
    port = _positive_int(env, "PORTAL_PORT", DEFAULT_PORT, 65535)
    workers = _positive_int(env, "WEB_CONCURRENCY", DEFAULT_WORKERS, 256)
    threads = _positive_int(env, "WEB_THREADS", DEFAULT_THREADS, 64)
    return {
        "bind": [f"127.0.0.1:{port}"],
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "accesslog": "-",
        "control_socket_disable": True,
    }


class PortalApplication(BaseApplication):
    """gunicorn running :func:`portal.create_app` with the settings read at start."""

    def __init__(self, settings: Settings, options: dict[str, Any]) -> None:
        self._settings = settings
        self._options = options
        super().__init__(prog="openlineage-export-web")

    def load_config(self) -> None:
        for name, value in self._options.items():
            self.cfg.set(name, value)

    def load(self) -> Flask:
        from portal import create_app

        return create_app(settings=self._settings)


def main() -> int:
    try:
        settings = Settings.from_env()
        options = gunicorn_options()
    except ConfigError as error:
        print(f"web: {error}", file=sys.stderr)
        return 2
    PortalApplication(settings, options).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
