"""Ids no row can hold are a 404 at every URL, not a database error (finding 6 of the abuse review)."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.web import csrf_token_from

# Out of the id column's range, and "12" in Arabic-Indic digits (Werkzeug's \d+ took them as 12).
HUGE = [str(2**31), str(2**63), "9" * 30, chr(0x0661) + chr(0x0662)]


def _id_rules(app: Flask) -> list[tuple[str, str, str]]:
    rules = []
    for rule in app.url_map.iter_rules():
        if "<int:" not in rule.rule:
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            rules.append((rule.endpoint, method, rule.rule))
    return rules


def test_every_id_url_answers_404_for_ids_out_of_range(app: Flask, admin_client: FlaskClient) -> None:
    rules = _id_rules(app)
    endpoints = {endpoint for endpoint, _, _ in rules}
    assert {"api_keys.revoke", "integrations.setup", "integrations.save", "integrations.delete"} <= endpoints
    token = csrf_token_from(admin_client.get("/api-keys/").get_data(as_text=True))
    for endpoint, method, rule in rules:
        for value in HUGE:
            url = re.sub(r"<int:[a-z_]+>", value, rule)
            response = admin_client.open(url, method=method, data={"csrf_token": token})
            assert response.status_code == 404, (endpoint, method, url, response.status_code)


@pytest.mark.parametrize("value", [str(2**31 - 1), "0"])
def test_ids_in_range_still_reach_the_view(admin_client: FlaskClient, value: str) -> None:
    # No such connector: the view's own lookup says 404 (no database error on the largest id).
    assert admin_client.get(f"/integrations/openlineage/{value}/history").status_code == 404


def test_ops_page_number_is_bounded(client: FlaskClient, operator: object) -> None:
    from tests.web import login

    login(client, "ops@vendor.test")
    assert client.get(f"/ops/?page={10**30}").status_code == 200


def test_the_id_pattern_matches_exactly_zero_to_the_largest_id() -> None:
    from portal.converters import INT4_MAX, decimal_at_most

    pattern = re.compile(decimal_at_most(INT4_MAX) + r"\Z", re.ASCII)
    for value in ("0", "7", "999999999", "1000000000", "1999999999", "2147483647", "2147483639"):
        assert pattern.match(value), value
    for value in ("2147483648", "2147483650", "2200000000", "3000000000", "9999999999", "21474836470"):
        assert not pattern.match(value), value
    for limit in (0, 9, 10, 99, 100, 205, 1000, 4321):
        small = re.compile(decimal_at_most(limit) + r"\Z", re.ASCII)
        assert [n for n in range(limit + 50) if small.match(str(n))] == list(range(limit + 1)), limit
