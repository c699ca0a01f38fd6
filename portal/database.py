"""One SQLAlchemy session per request, closed when the request ends."""

from __future__ import annotations

from flask import Flask, current_app, g
from sqlalchemy.orm import Session

from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory


def settings() -> Settings:
    return current_app.config["SETTINGS"]  # type: ignore[no-any-return]


def get_db() -> Session:
    if "db" not in g:
        g.db = session_factory(settings().database_url)()
    return g.db  # type: ignore[no-any-return]


def _close_db(_exc: BaseException | None) -> None:
    session: Session | None = g.pop("db", None)
    if session is not None:
        session.close()


def init_app(app: Flask) -> None:
    app.teardown_appcontext(_close_db)
