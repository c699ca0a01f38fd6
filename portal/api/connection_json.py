"""How the connections API writes a connection and an export run in JSON (camelCase, ISO 8601 times).

The settings' names are the wizard's fields in camelCase (``account_id`` is ``accountId``); errors name
a field at fault the same way. A run is written from its table's columns, less the worker's own
bookkeeping, so that a column added to ``export_runs`` appears in the API without a change here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import url_for
from sqlalchemy import inspect

from lineage_core.infra.models import Connector, ExportRun
from lineage_core.setup import connectors, rotations
from lineage_core.setup.destination import EXPORT_FILE_NAME, s3_url
from portal.database import get_db
from portal.integrations.card import card_view
from portal.integrations.lifecycle import SETTINGS_PARSERS

# The worker's lease and recovery state, and the RQ job id: meaningful only inside the service.
_INTERNAL_RUN_COLUMNS = frozenset({"connector_id", "lease_owner", "lease_expires_at", "completing", "job_id"})


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# camelCase API name -> the wizard's field name.
SETTING_NAMES: dict[str, str] = {camel(field): field for field in SETTINGS_PARSERS}


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if hasattr(value, "value") and isinstance(value.value, str):  # an enum member
        return value.value
    return value


def run_json(run: ExportRun) -> dict[str, Any]:
    columns = inspect(ExportRun).columns
    return {
        camel(column.key): _value(getattr(run, column.key))
        for column in columns
        if column.key not in _INTERNAL_RUN_COLUMNS
    }


def connection_json(connector: Connector) -> dict[str, Any]:
    settings = {camel(field): getattr(connector, field) for field in SETTINGS_PARSERS}
    card = card_view(connector, connectors.card_status(get_db(), connector.id)).as_json()
    links = {
        "self": url_for("connections_api.get_connection", connector_id=connector.id, _external=True),
        "cloudformation": url_for(
            "connections_api.download_cloudformation", connector_id=connector.id, _external=True
        ),
        "terraform": url_for("connections_api.download_terraform", connector_id=connector.id, _external=True),
        "runs": url_for("connections_api.list_runs", connector_id=connector.id, _external=True),
    }
    body: dict[str, Any] = {
        "id": connector.id,
        "status": connector.status.value,
        "externalId": connector.external_id,
        "settings": settings,
        "settingsComplete": connector.settings_complete,
        "roleArn": connector.role_arn,
        "bucketRegion": connector.bucket_region,
        "verifiedAt": _value(connector.verified_at),
        "lastCheckError": connector.last_check_error,
        "nextExportAt": _value(connector.next_export_at),
        "exportUrl": (
            s3_url(connector.bucket, connector.prefix, EXPORT_FILE_NAME) if connector.bucket else None
        ),
        "createdAt": _value(connector.created_at),
        "updatedAt": _value(connector.updated_at),
        "card": {camel(name): value for name, value in card.items()},
        "rotation": rotations.rotation_view(connector),
        "links": links,
    }
    return body
