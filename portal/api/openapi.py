"""The OpenAPI 3.1 document of the whole ``/api/v1`` API: ingest (single and batch) and connections.

Served as JSON at ``GET /api/v1/openapi.json`` (``openapi_views``). It is kept true by
tests/test_openapi.py: the document validates as OpenAPI 3.1, every ``/api/v1`` route of the app is in
it and nothing else is, and schemathesis calls every operation on the running app and checks each
status, header and body against it.

Built as Python data rather than a file so that the limits it states are the code's own values.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lineage_core.accounts.api_keys import Scope
from lineage_core.infra.config import (
    DEFAULT_LINEAGE_BATCH_MAX_BYTES,
    DEFAULT_LINEAGE_BATCH_MAX_EVENTS,
    DEFAULT_LINEAGE_MAX_EVENT_BYTES,
)
from lineage_core.lineage.limits import DEFAULT_LIMITS
from lineage_core.setup.destination import DEFAULT_INTERVAL_DAYS, MAX_INTERVAL_DAYS, MIN_INTERVAL_DAYS
from portal.api.connections import RUNS_LIMIT_MAX

Json = dict[str, Any]

# The defaults of the settings LINEAGE_BATCH_MAX_EVENTS, LINEAGE_BATCH_MAX_BYTES, LINEAGE_MAX_EVENT_BYTES.
BATCH_MAX_EVENTS = DEFAULT_LINEAGE_BATCH_MAX_EVENTS
BATCH_MAX_BYTES = DEFAULT_LINEAGE_BATCH_MAX_BYTES
EVENT_MAX_BYTES = DEFAULT_LINEAGE_MAX_EVENT_BYTES


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: Json, description: str, headers: Json | None = None) -> Json:
    response: Json = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        response["headers"] = headers
    return response


def _error(description: str) -> Json:
    return _json(_ref("Error"), description)


def _nullable(kind: str) -> Json:
    return {"type": [kind, "null"]}


_RETRY_AFTER = {"Retry-After": {"$ref": "#/components/headers/RetryAfter"}}
_SHARED = {
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "403": {"$ref": "#/components/responses/Forbidden"},
    "429": {"$ref": "#/components/responses/RateLimited"},
    "503": {"$ref": "#/components/responses/DatabaseUnavailable"},
}
_ORG_HEADER = {"$ref": "#/components/parameters/Organization"}
_CONNECTOR_ID = {"$ref": "#/components/parameters/ConnectorId"}


def _operation(
    operation_id: str,
    summary: str,
    scope: Scope,
    responses: Json,
    *,
    description: str = "",
    parameters: list[Json] | None = None,
    body: Json | None = None,
    tag: str = "connections",
) -> Json:
    operation: Json = {
        "operationId": operation_id,
        "summary": summary,
        "description": (description + f"\n\nScope: `{scope}`.").strip(),
        "tags": [tag],
        "security": [{"apiKey": [str(scope)]}],
        "parameters": [_ORG_HEADER, *(parameters or [])],
        "responses": {**responses, **_SHARED},
    }
    if body is not None:
        operation["requestBody"] = body
    return operation


_SETTINGS_BODY = {
    "required": False,
    "content": {"application/json": {"schema": _ref("SettingsInput")}},
}

_NOT_FOUND = _error("No such connection in the key's organization (another organization's is the same 404).")


def _connection_paths() -> Json:
    read, write = Scope.CONNECTIONS_READ, Scope.CONNECTIONS_WRITE
    one = [_CONNECTOR_ID]
    invalid = _error(
        "A setting is invalid (`invalid_settings`, one problem per field, in the wizard's words), unknown "
        "(`unknown_field`), of the wrong type (`invalid_type`), the External ID was sent "
        "(`external_id_read_only`), or the body is not a JSON object (`malformed_body`). Nothing is stored."
    )
    media = _error("The body is not JSON (`unsupported_media_type`).")
    return {
        "/api/v1/connections": {
            "get": _operation(
                "listConnections",
                "List the organization's connections",
                read,
                {"200": _json(_ref("ConnectionList"), "The connections, oldest first.")},
            ),
            "post": _operation(
                "createConnection",
                "Create a draft connection (the wizard's Start Setup, and Next when settings are sent)",
                write,
                {
                    "201": _json(
                        _ref("Connection"),
                        "The draft, with its External ID and its download links.",
                        {"Location": {"schema": {"type": "string", "format": "uri"}}},
                    ),
                    "400": invalid,
                    "415": media,
                },
                description=(
                    "Without a body: a draft with only its External ID, as Start Setup makes it. With "
                    "settings: they are checked by the wizard's rules first (all of them, as the form "
                    "does), and nothing is created when one is wrong."
                ),
                body=_SETTINGS_BODY,
            ),
        },
        "/api/v1/connections/{connector_id}": {
            "get": _operation(
                "getConnection",
                "Read a connection",
                read,
                {"200": _json(_ref("Connection"), "The connection."), "404": _NOT_FOUND},
                parameters=one,
            ),
            "patch": _operation(
                "changeConnection",
                "Change a connection's settings (the wizard's Next)",
                write,
                {
                    "200": _json(_ref("SettingsChange"), "Stored; says whether the role changed."),
                    "400": invalid,
                    "404": _NOT_FOUND,
                    "415": media,
                },
                description=(
                    "The settings sent replace the stored ones; the others stay. A change of bucket, "
                    "prefix, account, role name or path, KMS key or permissions boundary changes the "
                    "role: the connection goes back to `draft` until the updated stack is activated."
                ),
                parameters=one,
                body=_SETTINGS_BODY,
            ),
            "delete": _operation(
                "deleteConnection",
                "Delete a connection (the export file and the AWS role stay)",
                write,
                {"204": {"description": "Deleted."}, "404": _NOT_FOUND},
                parameters=one,
            ),
        },
        "/api/v1/connections/{connector_id}/activate": {
            "post": _operation(
                "activateConnection",
                "Run the write check and activate (the portal's Save)",
                write,
                {
                    "200": _json(_ref("Activation"), "The write check passed."),
                    "404": _NOT_FOUND,
                    "409": _error("The settings are not complete yet (`settings_incomplete`)."),
                    "422": _error(
                        "The write check failed (`write_check_failed`). The message is the spec's: "
                        '"Could not assume the trust role…" (problems name accountId and roleName) or '
                        '"Could not write to s3://…" (bucket, prefix, kmsKeyArn). Correct the field and '
                        "activate again; the External ID stays."
                    ),
                },
                parameters=one,
            )
        },
        "/api/v1/connections/{connector_id}/exports": {
            "post": _operation(
                "exportNow",
                "Export now",
                write,
                {
                    "202": _json(_ref("ExportStarted"), "An export is queued."),
                    "404": _NOT_FOUND,
                    "409": _error(
                        "The connection is not active (`not_active`), or an export is already queued or "
                        "running (`export_in_flight`)."
                    ),
                },
                parameters=one,
            )
        },
        "/api/v1/connections/{connector_id}/pause": {
            "post": _operation(
                "pauseConnection",
                "Pause the export schedule",
                write,
                {"200": _json(_ref("PauseChange"), "Paused (or nothing to do)."), "404": _NOT_FOUND},
                parameters=one,
            )
        },
        "/api/v1/connections/{connector_id}/resume": {
            "post": _operation(
                "resumeConnection",
                "Resume the export schedule",
                write,
                {"200": _json(_ref("PauseChange"), "Resumed (or nothing to do)."), "404": _NOT_FOUND},
                parameters=one,
            )
        },
        "/api/v1/connections/{connector_id}/rotation": {
            "post": _operation(
                "startRotation",
                "Rotate the External ID: start",
                write,
                {
                    "200": _json(_ref("RotationChange"), "A new External ID is ready."),
                    "404": _NOT_FOUND,
                    "409": _error(
                        "The connection was never activated, or a rotation is already under way "
                        "(`rotation_refused`)."
                    ),
                },
                description=(
                    "The downloads then trust the new ID beside the current one: update the stack with "
                    "them, then activate, which verifies the new ID. Until then exports keep using the "
                    "current one."
                ),
                parameters=one,
            ),
            "delete": _operation(
                "cancelRotation",
                "Cancel the External ID's rotation",
                write,
                {
                    "200": _json(_ref("RotationChange"), "Cancelled: the current External ID stays."),
                    "404": _NOT_FOUND,
                    "409": _error("No rotation is pending (`rotation_refused`)."),
                },
                parameters=one,
            ),
        },
        "/api/v1/connections/{connector_id}/runs": {
            "get": _operation(
                "listRuns",
                "List the connection's export runs, newest first",
                read,
                {
                    "200": _json(_ref("RunList"), "The runs."),
                    "400": _error(f"limit is not a whole number from 1 to {RUNS_LIMIT_MAX}."),
                    "404": _NOT_FOUND,
                },
                parameters=[
                    _CONNECTOR_ID,
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": RUNS_LIMIT_MAX},
                    },
                ],
            )
        },
        "/api/v1/connections/{connector_id}/cloudformation": {
            "get": _operation(
                "downloadCloudFormation",
                "Download the CloudFormation template (the wizard's Download YAML File)",
                read,
                {
                    "200": {
                        "description": "The role template; each parameter's default is this connection's.",
                        "content": {
                            "application/x-yaml": {
                                "schema": {
                                    "type": "object",
                                    "required": ["AWSTemplateFormatVersion", "Parameters", "Resources"],
                                }
                            }
                        },
                    },
                    "404": _NOT_FOUND,
                    "409": _error(
                        "The settings are not complete (`settings_incomplete`), or break the template's "
                        "rules (`template_unavailable`)."
                    ),
                },
                parameters=one,
            )
        },
        "/api/v1/connections/{connector_id}/terraform": {
            "get": _operation(
                "downloadTerraform",
                "Download the Terraform module, zipped with a filled-in main.tf",
                read,
                {
                    "200": {
                        "description": "A zip of the customer-role module and a root module using it.",
                        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    "404": _NOT_FOUND,
                    "409": _error("The settings are not complete (`settings_incomplete`)."),
                },
                parameters=one,
            )
        },
    }


def _ingest_paths() -> Json:
    lineage = Scope.LINEAGE_WRITE
    limits = DEFAULT_LIMITS
    event_limits = (
        f"at most {limits.inputs:,} inputs, {limits.outputs:,} outputs, {limits.fields_per_schema:,} fields "
        f"per schema, {limits.fields_per_event:,} fields and {limits.column_lineage_edges:,} column-lineage "
        "edges per event"
    )
    gzip = {
        "name": "Content-Encoding",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "enum": ["gzip", "identity"]},
    }
    return {
        "/api/v1/lineage": {
            "post": _operation(
                "ingestLineage",
                "Send one OpenLineage event",
                lineage,
                {
                    "201": _json(
                        _ref("IngestAccepted"), "Stored (or already stored: sending it again is harmless)."
                    ),
                    "400": _error(
                        "Malformed JSON (`malformed_json`, `malformed_body`) or an invalid event "
                        "(`invalid_event`)."
                    ),
                    "413": _error(
                        f"The body is over LINEAGE_MAX_EVENT_BYTES (default {EVENT_MAX_BYTES} bytes) "
                        "before or after decompression (`payload_too_large`), or the event is over a "
                        f"limit: {event_limits} (`event_too_large`)."
                    ),
                    "415": _error(
                        "Content-Type is not JSON, or Content-Encoding not gzip (`unsupported_media_type`)."
                    ),
                },
                description="The endpoint of openlineage-python's HTTP transport and of Marquez clients.",
                parameters=[gzip],
                body={"required": True, "content": {"application/json": {"schema": _ref("LineageEvent")}}},
                tag="lineage",
            )
        },
        "/api/v1/lineage/batch": {
            "post": _operation(
                "ingestLineageBatch",
                "Send many OpenLineage events at once",
                lineage,
                {
                    "200": _json(
                        _ref("BatchResult"),
                        "The batch was read; each event is accepted or rejected on its own.",
                    ),
                    "400": _error("Not NDJSON, or not a JSON array of events (`malformed_body`)."),
                    "413": _error(
                        f"Over LINEAGE_BATCH_MAX_BYTES (default {BATCH_MAX_BYTES} bytes) before or after "
                        f"decompression (`payload_too_large`), or over LINEAGE_BATCH_MAX_EVENTS (default "
                        f"{BATCH_MAX_EVENTS}) events (`too_many_events`)."
                    ),
                    "415": _error("Unsupported Content-Type or Content-Encoding (`unsupported_media_type`)."),
                },
                description=(
                    "One event per line (`application/x-ndjson`; blank lines ignored) or a JSON array of "
                    f"events. Each event is also within LINEAGE_MAX_EVENT_BYTES and {event_limits}. On a "
                    "503 nothing of the batch was stored."
                ),
                parameters=[gzip],
                body={
                    "required": True,
                    "content": {
                        "application/x-ndjson": {"schema": {"type": "string"}},
                        "application/json": {"schema": {"type": "array", "items": _ref("LineageEvent")}},
                    },
                },
                tag="lineage",
            )
        },
    }


def _schemas() -> Json:
    settings_properties: Json = {
        "bucket": {"type": "string", "description": "S3 Bucket Name, without s3://."},
        "prefix": {**_nullable("string"), "description": "The folder in the bucket; empty for the root."},
        "accountId": {"type": "string", "description": "The AWS account that owns the bucket (12 digits)."},
        "roleName": {"type": "string", "description": "The IAM role name the template gives the role."},
        "rolePath": {**_nullable("string"), "description": "The role's path; `/` by default."},
        "intervalDays": {
            "type": ["integer", "string", "null"],
            "description": (
                f"Export Interval (days): {MIN_INTERVAL_DAYS} to {MAX_INTERVAL_DAYS}, "
                f"default {DEFAULT_INTERVAL_DAYS}."
            ),
        },
        "kmsKeyArn": {
            **_nullable("string"),
            "description": "The SSE-KMS key's full ARN, if the bucket uses one.",
        },
        "permissionsBoundaryArn": {
            **_nullable("string"),
            "description": "A managed policy ARN for the role.",
        },
    }
    stored_settings: Json = {
        "type": "object",
        "required": list(settings_properties),
        "properties": {
            "bucket": _nullable("string"),
            "prefix": {"type": "string"},
            "accountId": _nullable("string"),
            "roleName": _nullable("string"),
            "rolePath": {"type": "string"},
            "intervalDays": {"type": "integer"},
            "kmsKeyArn": _nullable("string"),
            "permissionsBoundaryArn": _nullable("string"),
        },
    }
    time = {"type": ["string", "null"], "format": "date-time"}
    return {
        "Problem": {
            "type": "object",
            "required": ["field", "code", "message"],
            "properties": {
                "field": {"type": "string"},
                "code": {"type": "string"},
                "message": {"type": "string"},
            },
        },
        "Error": {
            "type": "object",
            "required": ["error", "message"],
            "properties": {
                "error": {"type": "string", "description": "A stable code, e.g. `insufficient_scope`."},
                "message": {"type": "string", "description": "What is wrong and what to do, in a sentence."},
                "field": {"type": "string", "description": "What to correct: a setting, a header, `body`."},
                "problems": {"type": "array", "items": _ref("Problem")},
            },
        },
        "SettingsInput": {
            "type": "object",
            "additionalProperties": False,
            "properties": settings_properties,
            "description": "The wizard's fields. The External ID is generated and cannot be sent.",
        },
        "Settings": stored_settings,
        "Card": {
            "type": "object",
            "description": (
                "What the connector's card says; state is setup, paused, exporting, queued, failing, "
                "healthy or waiting."
            ),
            "required": ["state", "label", "lastStatus", "lastText", "canExportNow", "inFlight"],
            "properties": {
                "state": {"type": "string"},
                "label": {"type": "string"},
                "lastStatus": {"type": ["string", "null"], "enum": ["succeeded", "failed", None]},
                "lastText": {"type": "string"},
                "lastWord": {"type": "string"},
                "lastAt": {"type": "string"},
                "lastError": {"type": "string"},
                "sizeNote": {"type": "string"},
                "now": {"type": "string"},
                "nextExport": {"type": "string"},
                "canExportNow": {"type": "boolean"},
                "inFlight": {"type": "boolean"},
            },
        },
        "Links": {
            "type": "object",
            "required": ["self", "cloudformation", "terraform", "runs"],
            "properties": {
                name: {"type": "string", "format": "uri"}
                for name in ("self", "cloudformation", "terraform", "runs")
            },
        },
        "Connection": {
            "type": "object",
            "required": [
                "id",
                "status",
                "externalId",
                "settings",
                "settingsComplete",
                "card",
                "rotation",
                "links",
            ],
            "properties": {
                "id": {"type": "integer"},
                "status": {"type": "string", "enum": ["draft", "active", "paused"]},
                "externalId": {
                    "type": "string",
                    "description": "Read-only: the role's trust policy requires it.",
                },
                "settings": _ref("Settings"),
                "settingsComplete": {"type": "boolean"},
                "roleArn": _nullable("string"),
                "bucketRegion": _nullable("string"),
                "verifiedAt": time,
                "lastCheckError": _nullable("string"),
                "nextExportAt": time,
                "exportUrl": _nullable("string"),
                "createdAt": time,
                "updatedAt": time,
                "card": _ref("Card"),
                "links": _ref("Links"),
                "rotation": _ref("Rotation"),
            },
        },
        "Rotation": {
            "type": "object",
            "description": "The External ID's rotation (state none, pending, verified or complete).",
            "required": ["state", "externalId", "message"],
            "properties": {
                "state": {"type": "string", "enum": ["none", "pending", "verified", "complete"]},
                "externalId": {"type": "string"},
                "newExternalId": _nullable("string"),
                "oldExternalId": _nullable("string"),
                "oldIdStillWorks": _nullable("boolean"),
                "oldIdCheckedAt": time,
                "message": {"type": "string"},
            },
        },
        "RotationChange": {
            "type": "object",
            "required": ["connection", "rotation"],
            "properties": {"connection": _ref("Connection"), "rotation": _ref("Rotation")},
        },
        "ConnectionList": {
            "type": "object",
            "required": ["connections"],
            "properties": {"connections": {"type": "array", "items": _ref("Connection")}},
        },
        "SettingsChange": {
            "type": "object",
            "required": ["connection", "roleChanged", "message"],
            "properties": {
                "connection": _ref("Connection"),
                "roleChanged": {"type": "boolean"},
                "message": {"type": "string"},
            },
        },
        "Run": {
            "type": "object",
            "description": "An export run. Further columns of the run may appear.",
            "required": ["id", "status", "trigger", "queuedAt"],
            "properties": {
                "id": {"type": "integer"},
                "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed"]},
                "trigger": {"type": "string"},
                "queuedAt": {"type": "string", "format": "date-time"},
                "startedAt": time,
                "finishedAt": time,
                "events": _nullable("integer"),
                "bytes": _nullable("integer"),
                "etag": _nullable("string"),
                "versionId": _nullable("string"),
                "trimmed": _nullable("integer"),
                "omitted": _nullable("integer"),
                "error": _nullable("string"),
            },
        },
        "RunList": {
            "type": "object",
            "required": ["runs"],
            "properties": {"runs": {"type": "array", "items": _ref("Run")}},
        },
        "Activation": {
            "type": "object",
            "required": ["connection", "outcome", "run", "message"],
            "properties": {
                "connection": _ref("Connection"),
                "outcome": {
                    "type": "string",
                    "enum": ["first_export_queued", "exports_resumed", "checked_again"],
                },
                "run": {"oneOf": [_ref("Run"), {"type": "null"}]},
                "message": {"type": "string"},
            },
        },
        "ExportStarted": {
            "type": "object",
            "required": ["run", "message"],
            "properties": {"run": _ref("Run"), "message": {"type": "string"}},
        },
        "PauseChange": {
            "type": "object",
            "required": ["connection", "changed", "message"],
            "properties": {
                "connection": _ref("Connection"),
                "changed": {"type": "boolean"},
                "message": {"type": "string"},
            },
        },
        "LineageEvent": {
            "type": "object",
            "description": "An OpenLineage RunEvent, JobEvent or DatasetEvent (https://openlineage.io/spec/2-0-2/OpenLineage.json).",
        },
        "IngestAccepted": {
            "type": "object",
            "required": ["status", "lineage", "jobFacetsUpdated", "datasetFacetsUpdated"],
            "properties": {
                "status": {"const": "accepted"},
                "lineage": {
                    "type": "string",
                    "enum": ["replaced", "refreshed", "unchanged", "stale", "not_carried"],
                },
                "jobFacetsUpdated": {"type": "array", "items": {"type": "string"}},
                "datasetFacetsUpdated": {"type": "integer"},
            },
        },
        "BatchResult": {
            "type": "object",
            "required": ["status", "accepted", "rejected", "results"],
            "properties": {
                "status": {"const": "read"},
                "accepted": {"type": "integer"},
                "rejected": {"type": "integer"},
                "results": {
                    "type": "array",
                    "description": "One per event, in order.",
                    "items": {"oneOf": [_ref("BatchAccepted"), _ref("BatchRejected")]},
                },
            },
        },
        "BatchAccepted": {
            "allOf": [
                _ref("IngestAccepted"),
                {"type": "object", "required": ["index"], "properties": {"index": {"type": "integer"}}},
            ]
        },
        "BatchRejected": {
            "allOf": [
                _ref("Error"),
                {
                    "type": "object",
                    "required": ["index", "status", "httpStatus"],
                    "properties": {
                        "index": {"type": "integer"},
                        "status": {"const": "rejected"},
                        "httpStatus": {"type": "integer", "enum": [400, 413]},
                    },
                },
            ]
        },
    }


@cache
def openapi_document() -> Json:
    """The document (built once per process; do not modify the returned dict)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "OpenLineage export API",
            "version": "1",
            "description": (
                "Send lineage in (OpenLineage events) and set up the export to your S3 bucket from code. "
                "Every call but this document's takes an organization API key created by an org admin "
                "in the portal (API keys), with the scopes the call names. docs/api.md walks through "
                "a complete setup."
            ),
        },
        "tags": [
            {"name": "lineage", "description": "OpenLineage events in."},
            {"name": "connections", "description": "The S3 export connections."},
            {"name": "meta", "description": "This document."},
        ],
        "paths": {
            **_ingest_paths(),
            **_connection_paths(),
            "/api/v1/openapi.json": {
                "get": {
                    "operationId": "getOpenApiDocument",
                    "summary": "This document",
                    "tags": ["meta"],
                    "security": [],
                    "responses": {
                        "200": _json({"type": "object"}, "The OpenAPI 3.1 document of the API."),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "olk_<8 hex>_<43 characters>",
                    "description": (
                        "An organization API key. Its scopes: `lineage:write` (ingest; the default), "
                        "`connections:read`, `connections:write` (implies read)."
                    ),
                }
            },
            "parameters": {
                "Organization": {
                    "name": "X-Organization",
                    "in": "header",
                    "required": False,
                    "description": "The organization's slug: refused (403) if the key is another's.",
                    "schema": {"type": "string"},
                },
                "ConnectorId": {
                    "name": "connector_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
                },
            },
            "headers": {
                "RetryAfter": {"description": "Seconds to wait.", "schema": {"type": "string"}},
            },
            "responses": {
                "Unauthorized": _error(
                    "The key is missing (`missing_api_key`), not valid (`invalid_api_key`) or revoked "
                    "(`revoked_api_key`)."
                ),
                "Forbidden": _error(
                    "The key lacks the operation's scope (`insufficient_scope`, naming it), or belongs to "
                    "another organization than X-Organization (`wrong_organization`)."
                ),
                "RateLimited": _json(
                    _ref("Error"),
                    "Too many requests with a bad key from this address or key prefix (`rate_limited`).",
                    _RETRY_AFTER,
                ),
                "DatabaseUnavailable": _json(
                    _ref("Error"),
                    "The database did not answer (`database_unavailable`); retry later.",
                    _RETRY_AFTER,
                ),
            },
            "schemas": _schemas(),
        },
    }
