"""Form helpers shared by the blueprints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wtforms import Field, ValidationError

from lineage_core.setup.destination import FieldError


class ParsedBy:
    """A validator that runs one of ``lineage_core.setup.destination``'s parsers and keeps its result.

    The parsed (canonical) value replaces ``field.data``, so views store exactly what was checked.
    """

    def __init__(self, parser: Callable[[str], Any]) -> None:
        self.parser = parser

    def __call__(self, form: Any, field: Field) -> None:
        try:
            field.data = self.parser(field.data if isinstance(field.data, str) else "")
        except FieldError as error:
            raise ValidationError(str(error)) from error
