"""The password policy: common passwords, in thin disguise too, are refused; passphrases pass."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from lineage_core.accounts.common_passwords import COMMON_PASSWORDS
from lineage_core.accounts.errors import AccountError
from lineage_core.accounts.passwords import common_passwords, password_problem
from lineage_core.accounts.users import create_user
from lineage_core.infra.models import Role
from tests.web import PASSWORD

REFUSED = [
    "short",
    "Password1234",
    "password1234!",
    "P@55w0rd!!2024",
    "qwertyuiop12",
    "1qaz2wsx3edc",
    "123456789012",
    "aaaaaaaaaaaa",
    "abababababab",
    "Sunshine2024!!",
    "2024Sunshine!!",
    "iloveyou1234",
    "Welcome2026!",
    "michael12345",
    "Foundational123",
    "OpenLineage2026",
    "zxcvbnm12345",
    "letmein123456",
]
ACCEPTED = [PASSWORD, "violet kettle under moss", "blue-whale-sings-opera", "Tr0ub4dor&3 horse"]


def test_the_list_holds_a_few_thousand_lowercased_entries() -> None:
    entries = common_passwords()
    assert 3000 <= len(entries) <= 20000
    assert all(entry == entry.lower() and entry.strip() == entry for entry in entries)
    assert {"password", "123456", "qwerty", "iloveyou", "letmein", "dragon"} <= entries
    assert len(COMMON_PASSWORDS.splitlines()) == len(entries)


@pytest.mark.parametrize("password", REFUSED)
def test_common_passwords_and_disguises_are_refused(password: str) -> None:
    assert password_problem(password, "admin@acme.test") is not None


@pytest.mark.parametrize("password", ACCEPTED)
def test_passphrases_pass(password: str) -> None:
    assert password_problem(password, "admin@acme.test") is None


def test_the_e_mail_is_not_a_password() -> None:
    assert password_problem("admin@acme.test", "admin@acme.test") is not None
    assert password_problem("Admin@Acme.test!", "admin@acme.test") is not None


def test_create_user_applies_the_policy(db: Session) -> None:
    with pytest.raises(AccountError, match="most common"):
        create_user(db, "ops@vendor.test", "Password1234", Role.OPERATOR, None)
    with pytest.raises(AccountError, match="at least 12"):
        create_user(db, "ops@vendor.test", "tiny", Role.OPERATOR, None)
