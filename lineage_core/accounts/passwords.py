"""The password policy: long enough, and not a common password in thin disguise.

Length alone lets ``Password1234`` and ``qwertyuiop12`` through. A password is refused when, lowercased:

* it has fewer than 12 characters, or more than 1024 (the sign-in form's limit);
* it is in the list of :mod:`lineage_core.accounts.common_passwords`;
* it is only digits;
* what remains after removing the digits and symbols at either end (``2024Sunshine!!`` → ``sunshine``),
  also read with leetspeak undone (``p@55w0rd`` → ``password``), is in that list, or is the e-mail's
  name part (``admin`` of ``admin@acme.test``);
* it is one character repeated, or a run of a keyboard row, the alphabet or the digits
  (``aaaaaaaaaaaa``, ``123456789012``, ``asdfghjkl;'``);
* it has fewer than 5 distinct characters (``abababababab``).

Passphrases of several words pass: the check is on the whole, not on each word.
"""

from __future__ import annotations

from functools import cache

from lineage_core.accounts.common_passwords import COMMON_PASSWORDS
from lineage_core.accounts.errors import AccountError

MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024
MIN_DISTINCT_CHARACTERS = 5

_LEET = str.maketrans(
    {
        "@": "a",
        "4": "a",
        "8": "b",
        "3": "e",
        "1": "i",
        "!": "i",
        "0": "o",
        "$": "s",
        "5": "s",
        "7": "t",
        "+": "t",
    }
)
_RUNS = (
    "qwertyuiop[]\\asdfghjkl;'zxcvbnm,./",
    "1234567890-=",
    "abcdefghijklmnopqrstuvwxyz",
    "qazwsxedcrfvtgbyhnujmikolp",
    "0123456789",
)


@cache
def common_passwords() -> frozenset[str]:
    return frozenset(line for line in COMMON_PASSWORDS.splitlines() if line)


def _core(text: str) -> str:
    """``text`` without the digits, symbols and spaces at either end."""
    start, end = 0, len(text)
    while start < end and not text[start].isalpha():
        start += 1
    while end > start and not text[end - 1].isalpha():
        end -= 1
    return text[start:end]


def _is_run(text: str) -> bool:
    if len(set(text)) == 1:
        return True
    for row in _RUNS:
        for line in (row, row[::-1]):
            doubled = line * 3
            if text in doubled:
                return True
    return False


def password_problem(password: str, email: str | None = None) -> str | None:
    """Why the password is refused, as a sentence for the person choosing it; None when it is fine."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"The password must have at least {MIN_PASSWORD_LENGTH} characters."
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"The password must have at most {MAX_PASSWORD_LENGTH} characters."
    lowered = password.lower()
    common = common_passwords()
    name = (email or "").strip().lower().partition("@")[0]
    if lowered.isdigit():
        return "The password must not be only digits; choose a passphrase of unrelated words."
    core = _core(lowered)
    cores = {core, core.translate(_LEET), _core(lowered.translate(_LEET))} - {""}
    if lowered in common or any(candidate in common for candidate in cores):
        return (
            "That password is one of the most common ones (or one with a few digits or symbols added), "
            "which attackers try first. Choose a longer passphrase of unrelated words."
        )
    whole = (email or "").strip().lower()
    starts_with_name = lowered.startswith(name) and len(_core(lowered[len(name) :])) < 4
    if (whole and whole in lowered) or (len(name) >= 3 and (name in cores or starts_with_name)):
        return "The password must not be your e-mail address or its name part; choose a passphrase."
    if _is_run(lowered) or len(set(lowered)) < MIN_DISTINCT_CHARACTERS:
        return "The password is a repeated or sequential pattern; choose a passphrase of unrelated words."
    return None


def check_password(password: str, email: str | None = None) -> None:
    """Raises:
    AccountError: the password breaks the policy above; the message says why and what to do.
    """
    problem = password_problem(password, email)
    if problem is not None:
        raise AccountError(problem)
