"""Match the tables a statement names to the datasets the job declared.

Matching rule: a SQL table reference names a declared dataset when the reference's parts equal the
trailing parts of the dataset's dot-separated name (``raw.orders`` and ``orders`` both name
``analytics.raw.orders``), or when a one-part reference (a quoted name holding dots or slashes)
equals the whole dataset name. Parts
compare case-insensitively, except quoted parts in dialects where quoting makes a name case-sensitive
(Snowflake, PostgreSQL, Redshift, the generic dialect), which must match exactly. When several
datasets match, one whose name has exactly as many parts as the reference wins; otherwise the
reference is ambiguous and matches nothing (the engine reports it).

Namespace rule for jobs that declared no datasets at all: each table becomes the dataset
``(job_namespace, name)`` where ``name`` is the table's qualified name as written in the SQL, each
part in its stored spelling under the dialect (see :func:`lineage_core.derive.dialects.fold`:
Snowflake unquoted upper case, BigQuery as written, the others unquoted lower case).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from lineage_core.derive.dialects import QUOTE_SENSITIVE, fold
from lineage_core.derive.model import DatasetSchema


@dataclass(frozen=True, slots=True)
class TableName:
    """A table reference as written: its parts, outermost first, each with its quoting."""

    parts: tuple[tuple[str, bool], ...]

    @property
    def written(self) -> str:
        return ".".join(name for name, _ in self.parts)

    def stored(self, dialect: str | None) -> str:
        """The name under the dialect's case rules, for datasets derived from the SQL."""
        return ".".join(fold(name, quoted, dialect) for name, quoted in self.parts)

    def key(self, dialect: str | None) -> tuple[str, ...]:
        """A comparison key: identical for two spellings of the same table in this dialect."""
        return tuple(_compare_form(name, quoted, dialect) for name, quoted in self.parts)


def _compare_form(name: str, quoted: bool, dialect: str | None) -> str:
    if quoted and dialect in QUOTE_SENSITIVE:
        return "\x00" + name  # exact; the prefix keeps it apart from any folded spelling
    return name.casefold()


def table_name(table: exp.Table) -> TableName | None:
    """The name of a table reference, or ``None`` when it is not a plain name (a function, a path)."""
    parts: list[tuple[str, bool]] = []
    for part in table.parts:
        if not isinstance(part, exp.Identifier):
            return None
        parts.append((part.name, bool(part.args.get("quoted"))))
    if not parts:
        return None
    return TableName(tuple(parts))


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of matching one reference: a dataset, or the ambiguous candidates, or nothing."""

    dataset: DatasetSchema | None
    candidates: tuple[DatasetSchema, ...] = ()


class Catalog:
    """The declared datasets of one role (inputs or outputs), indexed for trailing-part matching."""

    def __init__(self, datasets: Sequence[DatasetSchema], dialect: str | None) -> None:
        self._dialect = dialect
        self._by_last: dict[str, list[tuple[DatasetSchema, tuple[str, ...]]]] = {}
        self._by_full: dict[str, list[DatasetSchema]] = {}
        seen: set[tuple[str, str]] = set()
        for dataset in datasets:
            if (dataset.namespace, dataset.name) in seen:
                continue  # declared twice: one dataset
            seen.add((dataset.namespace, dataset.name))
            parts = tuple(dataset.name.split("."))
            self._by_last.setdefault(parts[-1].casefold(), []).append((dataset, parts))
            self._by_full.setdefault(dataset.name.casefold(), []).append(dataset)

    def match(self, name: TableName) -> Match:
        """The declared dataset ``name`` refers to (see the module docstring for the rule)."""
        last = name.parts[-1][0]
        found: list[tuple[DatasetSchema, bool]] = []
        for dataset, parts in self._by_last.get(last.casefold(), ()):
            if len(parts) < len(name.parts):
                continue
            tail = parts[len(parts) - len(name.parts) :]
            if all(
                _part_equal(sql, quoted, ds, self._dialect)
                for (sql, quoted), ds in zip(name.parts, tail, strict=True)
            ):
                found.append((dataset, len(parts) == len(name.parts)))
        if not found and len(name.parts) == 1:
            # A quoted name holding dots or slashes (``"raw/orders.parquet"``) can only match whole.
            sql, quoted = name.parts[0]
            found = [
                (dataset, True)
                for dataset in self._by_full.get(sql.casefold(), [])
                if _part_equal(sql, quoted, dataset.name, self._dialect)
            ]
        if len(found) == 1:
            return Match(found[0][0])
        if not found:
            return Match(None)
        exact = [dataset for dataset, is_exact in found if is_exact]
        if len(exact) == 1:
            return Match(exact[0])
        return Match(None, tuple(dataset for dataset, _ in found))


def _part_equal(sql: str, quoted: bool, declared: str, dialect: str | None) -> bool:
    if quoted and dialect in QUOTE_SENSITIVE:
        return sql == declared
    return sql.casefold() == declared.casefold()
