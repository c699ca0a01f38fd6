"""Plain-English explanations of derived edges.

Every sentence is built from the SQL itself, deterministically: expressions are rendered back with
sqlglot in the job's dialect, with the column names as the author wrote them (qualification and
case folding undone), and cut to about 200 characters with "…". ``{out}`` is the output column,
``{field}`` the input column (as the dataset declares it), ``{ds}`` the input dataset's name.

Grammar, one template per edge kind:

* DIRECT IDENTITY: "Copied from `{field}` of `{ds}`."
* DIRECT TRANSFORMATION: "`{out}` is `{expression}`: computed from `{field}` of `{ds}`."
* DIRECT TRANSFORMATION, masking, when the masking function is the whole expression:
  "{Masking} of `{field}` from `{ds}` (masked)." ({Masking}: "SHA-256 hash", "MD5 hash",
  "Fingerprint (FARM_FINGERPRINT)", "Encryption (AES_ENCRYPT)", "Masked value (MASK)", ...);
  otherwise the TRANSFORMATION sentence with " through {masking} (masked)" before the period.
* DIRECT AGGREGATION: "{Aggregate} `{argument}` from `{ds}`[ over a window partitioned by `{p}`,
  ordered by `{o}`][ per `{key}`, `{key}`][, counting only rows where `{filter}`][ (masked)]."
  ({Aggregate}: "Sum of", "Average of", "Count of", "Count of distinct", "Minimum of", "Maximum of",
  ...; ``argument`` is the input column when the aggregate takes the bare column, else the argument's
  SQL; the group keys and filter are those of the query level where the aggregate is computed.)
* INDIRECT JOIN: "Rows of `{left}` are joined to `{right}` on `{condition}`."
* INDIRECT FILTER: "Only rows where `{condition}` are kept." (HAVING: "Only groups where ...";
  a semi-join subquery is the condition it sits in; an inner ``ORDER BY ... LIMIT``:
  "Only the top rows by `{keys}` are kept.")
* INDIRECT GROUP_BY: "One output row per distinct `{key}`, `{key}`."
* INDIRECT SORT: "Output ordered by `{key}`[ descending]."
* INDIRECT WINDOW: "`{out}` is computed over rows partitioned by `{p}`, ordered by `{o}`."
* INDIRECT CONDITIONAL: "`{out}` depends on `{field}` through the condition `{condition}`."

Field-level JOIN/FILTER/GROUP_BY/SORT (the row logic of a scalar subquery that computes one column)
take the prefix "For `{out}`: ". When a sentence does not already name the input column, it ends
with " Uses `{field}` of `{ds}`." so every explanation names the columns it is about.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

MAX_SQL = 200

_AGGREGATE_WORDS: dict[type[exp.Expr], str] = {
    exp.Sum: "Sum of",
    exp.Avg: "Average of",
    exp.Count: "Count of",
    exp.Min: "Minimum of",
    exp.Max: "Maximum of",
    exp.Median: "Median of",
    exp.Stddev: "Standard deviation of",
    exp.StddevPop: "Population standard deviation of",
    exp.StddevSamp: "Sample standard deviation of",
    exp.Variance: "Variance of",
    exp.VariancePop: "Population variance of",
    exp.ArrayAgg: "Array of",
    exp.ArrayUniqueAgg: "Set of distinct",
    exp.GroupConcat: "Concatenation of",
    exp.ApproxDistinct: "Approximate count of distinct",
    exp.Hll: "Approximate count of distinct (HLL)",
    exp.CountIf: "Count of rows where",
    exp.AnyValue: "Any value of",
    exp.First: "First value of",
    exp.Last: "Last value of",
    exp.LogicalAnd: "Logical AND of",
    exp.LogicalOr: "Logical OR of",
    exp.Mode: "Most frequent value of",
    exp.ArgMax: "Value at the maximum of",
    exp.ArgMin: "Value at the minimum of",
}


def _function_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return type(node).__name__.upper()


def aggregate_words(node: exp.Expr) -> str:
    """The aggregate function in words: "Sum of", "Count of distinct", ..."""
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
        return "Count of distinct"
    words = _AGGREGATE_WORDS.get(type(node))
    if words:
        return words
    return f"{_function_name(node)} of"


def masking_words(node: exp.Expr) -> str:
    """A masking function in words: "SHA-256 hash", "MD5 hash", "Encryption (AES_ENCRYPT)", ..."""
    if isinstance(node, (exp.SHA2, exp.SHA2Digest)):
        length = node.args.get("length")
        bits = length.name if isinstance(length, exp.Literal) else "256"
        return f"SHA-{bits} hash"
    if isinstance(node, (exp.SHA, exp.SHA1Digest)):
        return "SHA-1 hash"
    if isinstance(node, (exp.MD5, exp.MD5Digest)):
        return "MD5 hash"
    name = _function_name(node)
    if name.startswith("SHA") and name[3:].isdigit():
        return f"SHA-{name[3:]} hash"
    if "ENCRYPT" in name:
        return f"Encryption ({name})"
    if name.startswith("MASK"):
        return f"Masked value ({name})"
    if "REDACT" in name:
        return f"Redacted value ({name})"
    if "FINGERPRINT" in name:
        return f"Fingerprint ({name})"
    return f"Hash ({name})"


class Renderer:
    """Renders expressions back to SQL as written, memoised per node (one render per node per run)."""

    def __init__(self, dialect: str | None) -> None:
        self._dialect = dialect
        self._memo: dict[int, str] = {}

    def sql(self, node: exp.Expr) -> str:
        key = id(node)
        text = self._memo.get(key)
        if text is None:
            text = self._render(node)
            self._memo[key] = text
        return text

    def _render(self, node: exp.Expr) -> str:
        as_written = node.transform(_as_written)
        if isinstance(as_written, exp.Alias):
            as_written = as_written.this
        try:
            text = as_written.sql(dialect=self._dialect)
        except Exception:  # rendering is best effort; the generic dialect renders anything parsed
            text = as_written.sql()
        text = " ".join(text.split())
        if len(text) > MAX_SQL:
            text = text[: MAX_SQL - 1].rstrip() + "…"
        return text


# Meta keys the engine sets before qualify(), which folds and qualifies names in place.
WRITTEN = "derive_written"
ALIAS_ADDED = "derive_alias_added"


def remember_written(query: exp.Expr) -> None:
    """Record how each column and table of ``query`` was written, so explanations show that."""
    for node in query.find_all(exp.Column, exp.Table):
        if isinstance(node, (exp.Column, exp.Table)):
            node.meta[WRITTEN] = tuple(
                (p.name, bool(p.args.get("quoted"))) for p in node.parts if isinstance(p, exp.Identifier)
            )


def _identifier(part: tuple[str, bool]) -> exp.Identifier:
    return exp.Identifier(this=part[0], quoted=part[1])


def _as_written(node: exp.Expr) -> exp.Expr:
    written = node.meta.get(WRITTEN)
    if isinstance(node, exp.Column):
        if isinstance(node.this, exp.Star) or not written:
            return exp.column(node.name) if not isinstance(node.this, exp.Star) else node
        parts = [_identifier(p) for p in written]
        if len(parts) > 4:
            return node
        return exp.Column(
            this=parts[-1], **dict(zip(("table", "db", "catalog"), reversed(parts[:-1]), strict=False))
        )
    if isinstance(node, exp.Table) and written:
        parts = [_identifier(p) for p in written]
        table = exp.Table(this=parts[-1], **dict(zip(("db", "catalog"), reversed(parts[:-1]), strict=False)))
        alias = node.args.get("alias")
        if isinstance(alias, exp.TableAlias) and not node.meta.get(ALIAS_ADDED):
            table.set("alias", alias.copy())
        return table
    # qualify() names every projection; an alias equal to the column's own name is its doing.
    if (
        isinstance(node, exp.Alias)
        and isinstance(node.this, exp.Column)
        and node.alias.casefold() == node.this.name.casefold()
    ):
        return _as_written(node.this)
    return node


@dataclass(frozen=True, slots=True)
class Note:
    """The material of one explanation, gathered along the walk (all strings already rendered)."""

    expression: str | None = None
    masking: str | None = None
    masking_is_whole: bool = False
    aggregate: str | None = None
    argument: str | None = None
    window: str | None = None
    group_keys: tuple[str, ...] = ()
    filter: str | None = None
    condition: str | None = None
    clause: str | None = None  # JOIN: the joined pair; FILTER: "rows"/"groups"/"top"
    sort_desc: bool = False


def _ticks(items: tuple[str, ...]) -> str:
    return ", ".join(f"`{item}`" for item in items)


def describe(
    type_: str,
    subtype: str,
    masking: bool,
    note: Note,
    out: str | None,
    field: str,
    ds: str,
    field_level: bool,
) -> str:
    """The sentence for one edge (see the module docstring for the grammar)."""
    if type_ == "DIRECT":
        text = _direct(subtype, masking, note, out, field, ds)
    else:
        text = _indirect(subtype, note, out, field)
        if field_level and subtype not in ("WINDOW", "CONDITIONAL") and out is not None:
            text = f"For `{out}`: {text[0].lower()}{text[1:]}"
    if field.casefold() not in text.casefold():
        text = f"{text} Uses `{field}` of `{ds}`."
    return text


def _direct(subtype: str, masking: bool, note: Note, out: str | None, field: str, ds: str) -> str:
    if subtype == "IDENTITY":
        return f"Copied from `{field}` of `{ds}`."
    if subtype == "AGGREGATION":
        words = note.aggregate or "Aggregate of"
        argument = note.argument or field
        text = f"{words} `{argument}` from `{ds}`"
        if note.window:
            text += f" over a window {note.window}"
        if note.group_keys:
            text += f" per {_ticks(note.group_keys)}"
        if note.filter:
            text += f", counting only rows where `{note.filter}`"
        if masking:
            text += " (masked)"
        return text + "."
    if masking and note.masking and note.masking_is_whole:
        return f"{note.masking} of `{field}` from `{ds}` (masked)."
    name = f"`{out}`" if out else "The value"
    if note.expression:
        text = f"{name} is `{note.expression}`: computed from `{field}` of `{ds}`"
    else:
        text = f"{name} is computed from `{field}` of `{ds}`"
    if masking:
        text += f" through {note.masking or 'a masking function'} (masked)"
    return text + "."


def _indirect(subtype: str, note: Note, out: str | None, field: str) -> str:
    condition = note.condition or field
    if subtype == "JOIN":
        if note.clause:
            return f"Rows of {note.clause} on `{condition}`."
        return f"Rows are joined on `{condition}`."
    if subtype == "FILTER":
        if note.clause == "groups":
            return f"Only groups where `{condition}` are kept."
        if note.clause == "top":
            return f"Only the top rows by `{condition}` are kept."
        return f"Only rows where `{condition}` are kept."
    if subtype == "GROUP_BY":
        keys = note.group_keys or (condition,)
        return f"One output row per distinct {_ticks(keys)}."
    if subtype == "SORT":
        return f"Output ordered by `{condition}`{' descending' if note.sort_desc else ''}."
    name = f"`{out}`" if out else "The value"
    if subtype == "WINDOW":
        return f"{name} is computed over rows {note.window or 'of a window'}."
    return f"{name} depends on `{field}` through the condition `{condition}`."


def window_phrase(partition: tuple[str, ...], order: tuple[tuple[str, bool], ...]) -> str:
    """The OVER clause in words: "partitioned by `a`, ordered by `b` descending"."""
    pieces = []
    if partition:
        pieces.append(f"partitioned by {_ticks(partition)}")
    if order:
        keys = ", ".join(f"`{key}`{' descending' if desc else ''}" for key, desc in order)
        pieces.append(f"ordered by {keys}")
    return ", ".join(pieces) if pieces else "of the whole result"
