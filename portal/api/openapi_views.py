"""``GET /api/v1/openapi.json``: the API's OpenAPI 3.1 document, public (it holds no data of anyone)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from portal.api.openapi import openapi_document
from portal.security import public_endpoint

bp = Blueprint("api_docs", __name__, url_prefix="/api/v1")


@bp.get("/openapi.json")
@public_endpoint
def openapi_json() -> Response:
    response = jsonify(openapi_document())
    response.headers["Cache-Control"] = "public, max-age=300"
    return response
