"""The connections API's answers: the one error shape every ``/api/v1`` endpoint uses, and JSON bodies.

An error is ``{"error": code, "message": sentence, "field": where, "problems": [{"field", "code",
"message"}]}``, as the ingest endpoint answers: ``field`` names what to correct (a setting, a header,
the body), and ``problems`` lists every field at fault when there are several.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flask import Response, jsonify


@dataclass(frozen=True)
class Problem:
    field: str
    code: str
    message: str


class ApiError(Exception):
    """An answer other than success; raised anywhere in a view, turned into its JSON by :func:`answer`."""

    def __init__(
        self, status: int, code: str, problems: Sequence[Problem], headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(problems[0].message)
        self.status = status
        self.code = code
        self.problems = list(problems)
        self.headers = headers or {}

    @classmethod
    def one(cls, status: int, code: str, field: str, message: str, **headers: str) -> ApiError:
        """An error about one field, whose problem carries the error's own code."""
        return cls(status, code, [Problem(field, code, message)], headers)


def error_body(code: str, problems: Sequence[Problem]) -> dict[str, Any]:
    first = problems[0]
    return {
        "error": code,
        "message": first.message,
        "field": first.field,
        "problems": [{"field": p.field, "code": p.code, "message": p.message} for p in problems],
    }


def answer(error: ApiError) -> Response:
    response = jsonify(error_body(error.code, error.problems))
    response.status_code = error.status
    response.headers.update(error.headers)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="openlineage"'
    return response


def json_response(body: dict[str, Any], status: int = 200, **headers: str) -> Response:
    response = jsonify(body)
    response.status_code = status
    response.headers.update(headers)
    # Connections carry their External ID: keep them out of shared caches.
    response.headers["Cache-Control"] = "no-store"
    return response
