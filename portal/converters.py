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


class DatabaseIdConverter(IntegerConverter):
    """``int`` as an id column holds it: 0 to 2³¹-1, written in ASCII digits."""

    regex = r"[0-9]{1,10}"

    def __init__(self, map: Map, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max", INT4_MAX)
        super().__init__(map, *args, **kwargs)
        if self.max is None or self.max > INT4_MAX:
            self.max = INT4_MAX
