"""Split a job's SQL into statements, parse each on its own, and say what each one writes.

Each ``;``-separated statement is parsed separately so that one statement sqlglot cannot parse does
not hide the lineage of the others. :func:`plan` turns a parsed statement into a :class:`Plan`: the
table it writes, the query whose rows are written and how that query's columns land on the table's
columns. ``MERGE`` and ``UPDATE`` are rewritten into one SELECT over their source and target whose
projections are the assigned expressions, so the same column walk handles every statement kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

# Meta flag set on the target table inside a MERGE/UPDATE rewrite: its columns are the output's own
# previous values, not inputs.
SELF_TABLE = "derive_self"


_TOKEN_REPR = re.compile(r"<Token token_type: [^,]*, text: (.*?), line: \d+.*?>")


@dataclass(slots=True)
class Parsed:
    """One statement: its tree, or why it could not be parsed."""

    number: int
    tree: exp.Expr | None
    error: str | None


def _describe_parse_error(error: ParseError, number: int, hint: str) -> str:
    detail = error.errors[0] if error.errors else {}
    where = ""
    if detail.get("line") is not None:
        where = f" at line {detail['line']}, column {detail.get('col')}"
    description = str(detail.get("description") or error).split("\n")[0].rstrip(".")
    # sqlglot prints the offending token as its repr; its text is what a reader needs.
    description = _TOKEN_REPR.sub(lambda m: f"`{m.group(1)}`", description)
    return f"Statement {number} could not be parsed{where}: {description}{hint}."


def parse_statements(sql: str, dialect: str | None, hint: str = "") -> tuple[list[Parsed], str | None]:
    """Parse every statement of ``sql``; returns the statements and a whole-query tokenizer error.

    ``hint`` is appended to parse errors (the engine uses it to say the generic dialect was used).
    """
    engine = Dialect.get_or_raise(dialect)
    try:
        tokens = engine.tokenize(sql)
    except TokenError as error:
        message = str(error).split("\n")[0].rstrip(".")
        return [], f"The SQL could not be tokenized: {message}{hint}."
    chunks: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(token)
    parsed: list[Parsed] = []
    for chunk in chunks:
        if not chunk:
            continue
        number = len(parsed) + 1
        try:
            trees = engine.parser().parse(chunk, sql)
        except ParseError as error:
            parsed.append(Parsed(number, None, _describe_parse_error(error, number, hint)))
            continue
        tree = next((t for t in trees if t is not None), None)
        parsed.append(Parsed(number, tree, None))
    return parsed, None


@dataclass(slots=True)
class Plan:
    """What one statement writes and from which query.

    ``columns`` are the explicitly named target columns, matched by position to the query's
    projections (``None`` when the statement names none). ``conditions`` maps a projection index to
    the projection indices of conditions that guard it (MERGE's ``WHEN MATCHED AND ...``).
    ``value_projections`` is how many leading projections are values; the rest are conditions.
    """

    kind: str
    target: exp.Table | None
    query: exp.Query
    columns: list[exp.Identifier] | None = None
    conditions: dict[int, list[int]] = field(default_factory=dict)
    value_projections: int | None = None


# Statements that read and write no dataset: understood, nothing to derive.
_INERT = (
    exp.Use,
    exp.Set,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Drop,
    exp.Describe,
    exp.Show,
    exp.Command,
    exp.Comment,
    exp.Analyze,
)


def is_inert(tree: exp.Expr) -> bool:
    """Whether the statement moves no data (USE, SET, BEGIN, COMMIT, DROP, ...)."""
    if isinstance(tree, exp.Create):
        return not isinstance(tree.expression, exp.Query)
    if isinstance(tree, exp.Insert):
        return isinstance(tree.expression, exp.Values)
    return isinstance(tree, _INERT)


def _target_and_columns(node: exp.Expr | None) -> tuple[exp.Table | None, list[exp.Identifier] | None]:
    if isinstance(node, exp.Schema):
        columns = [c if isinstance(c, exp.Identifier) else c.this for c in node.expressions]
        identifiers = [c for c in columns if isinstance(c, exp.Identifier)]
        table = node.this
        return (table if isinstance(table, exp.Table) else None), identifiers or None
    if isinstance(node, exp.Table):
        return node, None
    return None, None


def _with_ctes(statement: exp.Expr, query: exp.Query) -> exp.Query:
    # ``CREATE VIEW v AS (SELECT ...)``: the parentheses are not a query level of their own.
    while isinstance(query, exp.Subquery) and isinstance(query.this, exp.Query) and not query.alias:
        query = query.this
    # ``WITH c AS (...) INSERT INTO t SELECT ... FROM c`` hangs the CTEs on the INSERT; move them onto
    # the query so its scopes see them.
    with_ = statement.args.get("with_")
    if isinstance(with_, exp.With) and not query.args.get("with_"):
        query.set("with_", with_.copy())
    return query


def plan(tree: exp.Expr) -> Plan | None:
    """The write plan of a statement, or ``None`` when it is not a supported writing statement."""
    if isinstance(tree, exp.Insert) and isinstance(tree.expression, exp.Query):
        target, columns = _target_and_columns(tree.this)
        if target is None:
            return None
        return Plan("insert", target, _with_ctes(tree, tree.expression), columns)
    if isinstance(tree, exp.Create) and isinstance(tree.expression, exp.Query):
        target, columns = _target_and_columns(tree.this)
        if target is None:
            return None
        return Plan("create", target, _with_ctes(tree, tree.expression), columns)
    if isinstance(tree, exp.Merge):
        return _plan_merge(tree)
    if isinstance(tree, exp.Update):
        return _plan_update(tree)
    if isinstance(tree, exp.Query):
        return Plan("select", None, tree)
    return None


def _column_identifier(node: exp.Expr) -> exp.Identifier | None:
    ident = node.this if isinstance(node, exp.Column) else node
    return ident if isinstance(ident, exp.Identifier) else None


def _plan_merge(tree: exp.Merge) -> Plan | None:
    target = tree.this
    using = tree.args.get("using")
    if not isinstance(target, exp.Table) or using is None:
        return None
    values: list[exp.Expr] = []
    columns: list[exp.Identifier] = []
    guards: list[tuple[int, exp.Expr]] = []
    whens = tree.args.get("whens")
    for when in whens.expressions if isinstance(whens, exp.Whens) else []:
        condition = when.args.get("condition")
        then = when.args.get("then")
        start = len(values)
        if isinstance(then, exp.Update):
            for assignment in then.expressions:
                ident = _column_identifier(assignment.this) if isinstance(assignment, exp.EQ) else None
                if ident is None:
                    return None
                columns.append(ident)
                values.append(assignment.expression)
        elif isinstance(then, exp.Insert):
            names = then.this.expressions if isinstance(then.this, exp.Tuple) else []
            row = then.expression.expressions if isinstance(then.expression, exp.Tuple) else []
            if not names or len(names) != len(row):
                return None  # INSERT * / INSERT VALUES without columns: see the limitations
            for name, value in zip(names, row, strict=True):
                ident = _column_identifier(name)
                if ident is None:
                    return None
                columns.append(ident)
                values.append(value)
        if condition is not None:
            guards.append((start, condition))
            guards.append((len(values), condition))  # end marker, paired below
    select = exp.select(*[exp.alias_(v.copy(), f"__m{i}", quoted=True) for i, v in enumerate(values)])
    conditions: dict[int, list[int]] = {}
    for pair in range(0, len(guards), 2):
        start, condition = guards[pair]
        end = guards[pair + 1][0]
        index = len(select.expressions)
        select = select.select(exp.alias_(condition.copy(), f"__m{index}", quoted=True), copy=False)
        for value_index in range(start, end):
            conditions.setdefault(value_index, []).append(index)
    own = target.copy()
    own.meta[SELF_TABLE] = True
    source = using.copy()
    select = select.from_(source, copy=False).join(own, on=tree.args.get("on"), join_type="inner", copy=False)
    if not select.expressions:
        return None
    return Plan("merge", target, select, columns, conditions, len(values))


def _plan_update(tree: exp.Update) -> Plan | None:
    target = tree.this
    if not isinstance(target, exp.Table):
        return None
    columns: list[exp.Identifier] = []
    values: list[exp.Expr] = []
    for assignment in tree.expressions:
        ident = _column_identifier(assignment.this) if isinstance(assignment, exp.EQ) else None
        if ident is None:
            return None
        columns.append(ident)
        values.append(assignment.expression)
    if not values:
        return None
    own = target.copy()
    own.meta[SELF_TABLE] = True
    select = exp.select(*[exp.alias_(v.copy(), f"__m{i}", quoted=True) for i, v in enumerate(values)])
    select = select.from_(own, copy=False)
    from_ = tree.args.get("from_")
    if isinstance(from_, exp.From):
        select = select.join(from_.this.copy(), join_type="cross", copy=False)
    for join in tree.args.get("joins") or []:
        select = select.join(join.copy(), copy=False)
    where = tree.args.get("where")
    if isinstance(where, exp.Where):
        select = select.where(where.this.copy(), copy=False)
    return Plan("update", target, select, columns, {}, len(values))
