"""The URL converter behind every ``<int:...>`` of the portal: database ids, ASCII digits, in range.

Our ids are PostgreSQL ``integer`` columns. Werkzeug's own ``int`` converter accepts any size, so
``/api-keys/2147483648/revoke`` reached the database and failed there ("integer out of range", a 500
and a traceback per request); and its ``\\d+`` also takes other scripts' digits ("١٢" is 12). A value
no row can have is simply no such page: a 404 before any query.
"""

from __future__ import annotations

from typing import Any

from werkzeug.routing import IntegerConverter, Map

INT4_MAX = 2**31 - 1


def decimal_at_most(limit: int) -> str:
    """A regular expression matching the decimal numbers 0 to ``limit`` (ASCII digits, no sign).

    In the URL's pattern itself, not only in ``to_python``: when one path has a GET and a POST rule
    (a confirmation page and its form), Werkzeug answers 405 to a POST whose value only ``to_python``
    refuses; a value the pattern refuses matches no rule, a 404.
    """
    digits = str(limit)
    if len(digits) == 1:
        return f"(?:[0-{limit}])"
    branches = [f"[0-9]{{1,{len(digits) - 1}}}"]
    for index, digit in enumerate(digits):
        lowest = 1 if index == 0 else 0
        if int(digit) > lowest:
            rest = len(digits) - index - 1
            tail = f"[0-9]{{{rest}}}" if rest else ""
            branches.append(f"{digits[:index]}[{lowest}-{int(digit) - 1}]{tail}")
    branches.append(digits)
    return "(?:" + "|".join(branches) + ")"


class DatabaseIdConverter(IntegerConverter):
    """``int`` as an id column holds it: 0 to 2³¹-1, written in ASCII digits."""

    regex = decimal_at_most(INT4_MAX)

    def __init__(self, map: Map, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max", INT4_MAX)
        super().__init__(map, *args, **kwargs)
        if self.max is None or self.max > INT4_MAX:
            self.max = INT4_MAX
