"""Error pages in the portal's own layout (navigation, sign-out), not Werkzeug's bare HTML.

400, 403, 404, 405 and 500 render ``errors/error.html`` for pages; requests for JSON (the ingest API,
``*.json`` endpoints such as the card's live status) get a JSON body of the same status instead. If
the page itself cannot be rendered (the database is down, say), a plain sentence is sent instead of
a second error.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, InternalServerError

log = logging.getLogger(__name__)

# What the admin reads, per status: a heading and one sentence. The exception's own description is
# not shown: Werkzeug's defaults speak about servers and URLs, not about the product.
PAGES: dict[int, tuple[str, str]] = {
    400: (
        "Something in that request was not right",
        "The form may have expired: go back, reload it and try again.",
    ),
    403: (
        "You do not have access to this page",
        "It belongs to another role. Use the links above to go where you can.",
    ),
    404: ("Page not found", "Nothing is here: the link may be old, or what it pointed to was deleted."),
    405: ("That action is not available here", "Use the buttons on the page rather than typing the address."),
    500: (
        "Something went wrong on our side",
        "The error is logged and nothing was half-saved. Try again in a moment.",
    ),
}


def wants_json() -> bool:
    return request.path.startswith("/api/") or request.path.endswith(".json")


def render_error(error: HTTPException) -> tuple[Response | str, int]:
    code = error.code or 500
    heading, sentence = PAGES.get(code, PAGES[500])
    if wants_json():
        return jsonify(error=error.name.lower().replace(" ", "_"), message=heading + "."), code
    try:
        return render_template("errors/error.html", code=code, heading=heading, sentence=sentence), code
    except Exception:  # the layout needs the database (the signed-in user); say it plainly instead
        log.exception("could not render the %s page", code)
        return f"{heading}. {sentence}", code


def _internal(error: InternalServerError) -> tuple[Response | str, int]:
    return render_error(error)


def init_app(app: Flask) -> None:
    for code in (400, 403, 404, 405):
        app.register_error_handler(code, render_error)
    app.register_error_handler(InternalServerError, _internal)
