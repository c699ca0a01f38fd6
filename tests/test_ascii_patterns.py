"""Every validation pattern is ASCII-only and anchored at the very end (finding 5 of the abuse review).

``\\d`` and ``\\w`` in a ``str`` pattern match any script's digits and letters unless compiled with
``re.ASCII`` (and ``int()`` then reads "١٢٣" as 123); ``$`` also matches before a trailing newline. Each
field gets these shapes; the source of every pattern is checked too, so a new one cannot slip back.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.accounts.api_keys import AuthenticationError, authenticate
from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.organizations import create_organization
from lineage_core.accounts.users import create_user
from lineage_core.infra.config import ConfigError, Settings
from lineage_core.infra.models import Connector, Role
from lineage_core.lineage.parse import EventError, check_event
from lineage_core.setup import destination as rules
from tests.web import post_form

ROOT = Path(__file__).resolve().parents[1]


def indic(text: str) -> str:
    """``text`` with its ASCII digits written as Arabic-Indic digits (U+0660-U+0669)."""
    return re.sub(r"[0-9]", lambda match: chr(0x0660 + int(match.group())), text)


ARABIC_INDIC = indic("123456789012")  # \d matches each of these digits unless compiled with re.ASCII

# (parser, a valid value, where in that value to put the hostile shapes)
FIELDS: list[tuple[str, Callable[[str], Any], str]] = [
    ("bucket", rules.parse_bucket_name, "acme-lineage"),
    ("prefix", rules.parse_prefix, "foundational/openlineage"),
    ("account_id", rules.parse_account_id, "123456789012"),
    ("role_name", rules.parse_role_name, "FoundationalExport"),
    ("role_path", rules.parse_role_path, "/integrations/"),
    ("kms_key_arn", rules.parse_kms_key_arn, "arn:aws:kms:us-east-1:123456789012:key/abcd-1234"),
    ("permissions_boundary_arn", rules.parse_permissions_boundary_arn, "arn:aws:iam::123456789012:policy/b"),
    ("interval_days", rules.parse_interval_days, "30"),
]


def _hostile(valid: str) -> list[str]:
    return [
        indic(valid),  # every ASCII digit replaced by its Arabic-Indic twin
        valid[:-1] + "ö",  # a non-ASCII letter where a \w would take it
        valid + "\nx",  # a line break inside (strip() cannot remove it)
        "x\n" + valid,
        valid + "\u00a0x",  # a Unicode space
    ]


@pytest.mark.parametrize(("name", "parse", "valid"), FIELDS, ids=[f[0] for f in FIELDS])
def test_destination_fields_refuse_non_ascii_and_line_breaks(
    name: str, parse: Callable[[str], Any], valid: str
) -> None:
    assert parse(valid) is not None
    for value in _hostile(valid):
        if value == valid:
            continue
        try:
            result = parse(value)
        except rules.FieldError:
            continue
        raise AssertionError(f"{name} accepted {value!r} as {result!r}")


def test_the_reported_boundary_arn_is_refused_by_the_form_and_nothing_is_stored(
    admin_client: FlaskClient, db: Session
) -> None:
    response = post_form(admin_client, "/integrations/openlineage/new", None, {})
    setup_url = response.headers["Location"]
    form = {
        "bucket": "acme-lineage",
        "prefix": "p",
        "account_id": "210987654321",
        "role_name": "FoundationalExport",
        "interval_days": "14",
        "kms_key_arn": "",
        "role_path": "/",
        "permissions_boundary_arn": f"arn:aws:iam::{ARABIC_INDIC}:policy/x",
    }
    response = post_form(admin_client, setup_url, None, form)
    assert response.status_code == 422
    assert "Enter a managed policy ARN" in response.get_data(as_text=True)
    db.expire_all()
    connector = db.scalars(select(Connector)).one()
    assert connector.permissions_boundary_arn is None and not connector.settings_complete


def _event(**overrides: Any) -> dict[str, Any]:
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2024-11-30T10:00:00Z",
        "producer": "https://example.test/producer",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
        "run": {"runId": "0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e"},
        "job": {"namespace": "ns", "name": "job"},
    }
    event.update(overrides)
    return event


@pytest.mark.parametrize(
    "event_time",
    [
        "2024-11-30T10:00:00Z\n",
        indic("2024-11-30T10:00:00") + "Z",
        "2024-11-30T10:00:00+" + indic("02:00"),
        "2024-11-30T10:00:00." + indic("123") + "Z",
    ],
)
def test_event_time_is_ascii_and_ends_where_it_ends(event_time: str) -> None:
    with pytest.raises(EventError, match="eventTime"):
        check_event(_event(eventTime=event_time))


@pytest.mark.parametrize(
    "run_id", ["0190b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e\n", indic("0190") + "b6f2-4e3c-7b8a-9d2e-5f6a7b8c9d0e"]
)
def test_run_id_is_ascii_and_ends_where_it_ends(run_id: str) -> None:
    with pytest.raises(EventError, match=r"run\.runId"):
        check_event(_event(run={"runId": run_id}))


def test_accounts_refuse_non_ascii_and_trailing_newlines(db: Session) -> None:
    for slug in ("acme\n", "acmö", "acme\u00a0"):
        with pytest.raises(AccountError):
            create_organization(db, slug)
    for email in ("admin@acme.test\nx", "ädmin@acme.test", "admin@acme\u00a0.test"):
        with pytest.raises(AccountError):
            create_user(db, email, "a long enough passphrase", Role.OPERATOR, None)
    with pytest.raises(AuthenticationError):
        authenticate(db, "olk_0123abcd_" + "a" * 43 + "\n")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VENDOR_AWS_ACCOUNT_ID", ARABIC_INDIC),
        ("VENDOR_AWS_ACCOUNT_ID", "123456789012\n"),
        ("EXPORT_QUEUE", "exports\n"),
        ("EXPORT_QUEUE", "exportö"),
    ],
)
def test_settings_patterns_are_ascii_and_anchored(name: str, value: str) -> None:
    env = {"SECRET_KEY": "s" * 32, "VENDOR_AWS_ACCOUNT_ID": "123456789012", name: value}
    with pytest.raises(ConfigError, match=name):
        Settings.from_env(env)


# The source: every pattern the product compiles --------------------------------------------------------

# lineage_core/derive reads sqlglot's own token repr, not input: no validation happens there.
_NOT_VALIDATION = {"lineage_core/derive/statements.py"}
_RE_FUNCTIONS = {"compile", "match", "fullmatch", "search"}


def _pattern_calls() -> list[tuple[str, int, str, bool]]:
    found = []
    for package in ("lineage_core", "portal", "worker"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in _NOT_VALIDATION or "/migrations/" in relative:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in _RE_FUNCTIONS
                ):
                    continue
                source = ast.get_source_segment(path.read_text(), node) or ""
                found.append((relative, node.lineno, source, "re.ASCII" in source))
    return found


def test_every_pattern_in_the_product_is_ascii_and_never_ends_with_a_dollar() -> None:
    """``\\d``, ``\\w``, ``\\s``, ``\\b`` and IGNORECASE need re.ASCII; no pattern ends with ``$``."""
    calls = _pattern_calls()
    assert len(calls) >= 15, calls
    for path, line, source, ascii_flag in calls:
        # Classes that take other scripts' characters without re.ASCII (explicit [0-9] or [/.:_-] do not).
        unicode_aware = re.search(r"\\[dDwWsSb]|IGNORECASE|re\.I\b", source)
        assert ascii_flag or not unicode_aware, f"{path}:{line}: compile with re.ASCII: {source}"
        assert not re.search(r"(?<!\\)\$['\"]", source), f"{path}:{line}: anchor with \\Z, not $: {source}"
