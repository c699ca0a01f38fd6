"""Adjust a statement's tree before ``qualify()``, where sqlglot's rules and the engine's differ.

* Unqualified columns in a query level that reads one table of unknown schema are qualified with
  that table: standard SQL resolves a name to the innermost level that has it, and qualify() would
  otherwise give up ("missing source schemas") in subqueries that could be correlated.
* A quoted column that is spelled exactly like a declared field is unquoted, so it compares with
  the declared (case-folded) schema; unquoted names compare case-insensitively anyway.
* ``JOIN ... USING`` names are recorded (see :data:`lineage_core.derive.walk.USING_META`).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from lineage_core.derive.facts import Binding
from lineage_core.derive.walk import USING_META


def prepare(query: exp.Expr, bindings: Mapping[str, Binding]) -> None:
    """Apply the adjustments of the module docstring to ``query``, in place."""
    declared = {f for b in bindings.values() for f in (b.known_columns() or ())}
    for select in list(query.find_all(exp.Select)):
        _mark_using(select)
        _qualify_single_unknown(select, bindings)
    if declared:
        for ident in query.find_all(exp.Identifier):
            if ident.args.get("quoted") and isinstance(ident.parent, exp.Column) and ident.name in declared:
                ident.set("quoted", False)


def _mark_using(select: exp.Select) -> None:
    # qualify() turns ``USING (k)`` into ON and an unqualified ``k`` into COALESCE(l.k, r.k).
    names: set[str] = set()
    for join in select.args.get("joins") or []:
        for ident in join.args.get("using") or []:
            names.add(ident.name.casefold())
    if names:
        select.meta[USING_META] = names


def _own_nodes(select: exp.Select) -> list[exp.Column]:
    columns: list[exp.Column] = []
    for node in select.walk(prune=lambda n: n is not select and isinstance(n, (exp.Query, exp.Subquery))):
        if isinstance(node, exp.Column):
            columns.append(node)
    return columns


def _qualify_single_unknown(select: exp.Select, bindings: Mapping[str, Binding]) -> None:
    from_ = select.args.get("from_")
    if not isinstance(from_, exp.From) or select.args.get("joins"):
        return
    table = from_.this
    if not isinstance(table, exp.Table):
        return
    binding = bindings.get(table.name)
    if binding is None or binding.known_columns() is not None:
        return
    alias_node = table.args.get("alias")
    alias = alias_node.this if isinstance(alias_node, exp.TableAlias) else None
    if not isinstance(alias, exp.Identifier):
        return
    aliases = {
        p.alias.casefold()
        for p in select.expressions
        if isinstance(p, exp.Alias) and not (isinstance(p.this, exp.Column) and p.this.name == p.alias)
    }
    for column in _own_nodes(select):
        if column.table or isinstance(column.this, exp.Star):
            continue
        if column.name.casefold() in aliases and not isinstance(column.parent, exp.Alias):
            continue
        column.set("table", alias.copy())
