"""The one error of the accounts room."""

from __future__ import annotations


class AccountError(ValueError):
    """An organization, user or API key cannot be created or used as asked; the message says why."""
