"""Compute column lineage from one qualified statement by walking its scopes once.

The statement is qualified once (``sqlglot.optimizer.qualify``) so every column names its source;
then :class:`Walker` follows each output column down through aliases, CTEs, derived tables, set
operations and subqueries to the columns of physical tables, memoising per (scope, column). This is
much cheaper than ``sqlglot.lineage``, which re-qualifies the query for every column.

Decisions, so the edges mean one thing:

* The subtype of a DIRECT path is the strongest step on it: AGGREGATION > TRANSFORMATION > IDENTITY
  (``SUM(x)`` in a CTE then ``total * 2`` outside is an AGGREGATION). Masking holds when any step
  masks (a hash, an encryption, a COUNT-like aggregate).
* An aggregate used as a window function (``SUM(x) OVER (...)``) is an AGGREGATION of ``x``; window
  navigation functions (LAG, LEAD, FIRST_VALUE, LAST_VALUE, NTH_VALUE) are TRANSFORMATIONs.
* CASE/IF/IFF conditions, CASE operands, NULLIF's second argument and an aggregate's ``FILTER
  (WHERE ...)`` are INDIRECT CONDITIONAL on the column they decide; CASE result branches and
  COALESCE arguments are DIRECT TRANSFORMATION.
* PARTITION BY / ORDER BY inside OVER are INDIRECT WINDOW on that column.
* JOIN conditions, WHERE/HAVING/QUALIFY, semi-join subqueries (IN/EXISTS/ANY), GROUP BY and the
  writing query's ORDER BY decide which rows exist, so they are dataset-level (no output field):
  JOIN, FILTER, GROUP_BY and SORT. Those of every query level the output reads from (CTEs, derived
  tables, union branches) count. An inner ``ORDER BY`` counts only with a LIMIT, as a FILTER (a
  top-N keeps rows); elsewhere it changes nothing. Once a column is used in a row-deciding or
  conditional position, everything it derives from is INDIRECT of that same subtype.
* The row logic of a scalar subquery that computes one column stays on that column (field-level
  JOIN/FILTER).
* A ``JOIN ... USING (k)`` column selected unqualified is an IDENTITY of ``k`` on both sides
  (qualify rewrites it as ``COALESCE(l.k, r.k)``, which is not a transformation the author wrote).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from lineage_core.derive.explain import WRITTEN, Note, Renderer, aggregate_words, masking_words, window_phrase
from lineage_core.derive.facts import Binding, Contribution, Source

DIRECT = "DIRECT"
INDIRECT = "INDIRECT"
_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}
USING_META = "derive_using"


def _types(*names: str) -> tuple[type[exp.Expr], ...]:
    # sqlglot adds and renames function classes between releases; take those this one has.
    found = (getattr(exp, name, None) for name in names)
    return tuple(t for t in found if isinstance(t, type))


_MASK_TYPES = _types(
    "MD5",
    "MD5Digest",
    "SHA",
    "SHA1Digest",
    "SHA2",
    "SHA2Digest",
    "StandardHash",
    "FarmFingerprint",
    "Encrypt",
    "EncryptRaw",
    "CityHash64",
    "MD5NumberLower64",
    "MD5NumberUpper64",
)
_MASK_NAMES = frozenset(
    {
        "HASH",
        "SHA1",
        "SHA224",
        "SHA256",
        "SHA384",
        "SHA512",
        "SHA1_HEX",
        "SHA2_HEX",
        "SHA1_BINARY",
        "SHA2_BINARY",
        "MD5_HEX",
        "MD5_BINARY",
        "HASH_MD5",
        "HASH_SHA1",
        "HASH_SHA256",
        "HASHBYTES",
        "DIGEST",
        "HMAC",
        "CRYPT",
        "XXHASH32",
        "XXHASH64",
        "MURMUR3",
        "MURMUR_HASH3_32",
        "FNV_HASH",
        "FUNC_SHA1",
        "KEYED_HASH",
        "FARM_FINGERPRINT",
        "SIPHASH64",
        "CITYHASH64",
        "TOKENIZE",
    }
)
_COUNT_TYPES = _types("Count", "CountIf", "ApproxDistinct", "Hll")
_COUNT_NAMES = frozenset({"APPROX_SET", "HLL_COUNT", "HLL_COUNT.INIT", "APPROX_COUNT_DISTINCT_DS_HLL"})
_NAVIGATION_TYPES = _types("Lag", "Lead", "FirstValue", "LastValue", "NthValue")
_LEAVES = _types(
    "Literal", "Null", "Boolean", "Star", "DataType", "Var", "Identifier", "Placeholder", "Parameter"
)


def is_masking(node: exp.Expr) -> bool:
    """Hashing, encryption, redaction and masking functions."""
    if isinstance(node, _MASK_TYPES):
        return True
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        return name in _MASK_NAMES or name.startswith(("MASK", "REDACT")) or "ENCRYPT" in name
    return False


def _is_count(node: exp.Expr) -> bool:
    if isinstance(node, _COUNT_TYPES):
        return True
    return isinstance(node, exp.Anonymous) and node.name.upper() in _COUNT_NAMES


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _conjuncts(node.this)
    return [node]


class _State:
    """Where the walk is: DIRECT with a subtype, or inside an INDIRECT position (``kind`` = subtype)."""

    __slots__ = ("kind", "masking", "note", "subtype")

    def __init__(self, kind: str, subtype: str, masking: bool, note: Note) -> None:
        self.kind = kind
        self.subtype = subtype
        self.masking = masking
        self.note = note


_START = _State(DIRECT, "IDENTITY", False, Note())


def _merge(outer: Note, inner: Note) -> Note:
    masking = outer.masking or inner.masking
    whole = outer.masking_is_whole if outer.masking else (inner.masking_is_whole and outer.expression is None)
    aggregated = outer if outer.aggregate else inner
    return Note(
        expression=outer.expression or inner.expression,
        masking=masking,
        masking_is_whole=whole,
        aggregate=aggregated.aggregate,
        argument=aggregated.argument,
        window=aggregated.window if aggregated.aggregate else (outer.window or inner.window),
        group_keys=aggregated.group_keys,
        filter=aggregated.filter,
    )


def compose(state: _State, inner: Contribution) -> Contribution:
    """What an inner contribution becomes when reached from ``state``."""
    if state.kind == DIRECT:
        if inner.type == DIRECT:
            subtype = state.subtype if _RANK[state.subtype] >= _RANK[inner.subtype] else inner.subtype
            return Contribution(
                inner.source, DIRECT, subtype, state.masking or inner.masking, _merge(state.note, inner.note)
            )
        return inner  # a field-level INDIRECT of the inner column stays one
    return Contribution(inner.source, INDIRECT, state.kind, False, state.note)


class Walker:
    """Lineage of one qualified query: per projection, and for the rows as a whole.

    ``bindings`` maps the synthetic name the engine gave each physical table to what it stands for.
    Unresolvable columns are reported in ``problems`` and contribute nothing.
    """

    def __init__(
        self, root: Scope, bindings: Mapping[str, Binding], renderer: Renderer, problems: list[str]
    ) -> None:
        self._root = root
        self._bindings = bindings
        self._render = renderer.sql
        self._problems = problems
        self._scopes: dict[int, Scope] = {id(scope.expression): scope for scope in root.traverse()}
        self._projection_memo: dict[tuple[int, int], tuple[Contribution, ...]] = {}
        self._dataset_memo: dict[int, tuple[Contribution, ...]] = {}
        self._group_memo: dict[int, tuple[tuple[str, ...], str | None]] = {}
        self._active: set[tuple[int, int]] = set()
        self._reported: set[str] = set()

    # ----- public -----

    def output_names(self) -> list[str]:
        """The root query's output column names, in select-list order."""
        expression = self._root.expression
        return list(expression.named_selects) if isinstance(expression, exp.Query) else []

    def projection(self, scope: Scope, index: int) -> tuple[Contribution, ...]:
        """Contributions to the ``index``-th column of ``scope`` (DIRECT and field-level INDIRECT)."""
        key = (id(scope), index)
        cached = self._projection_memo.get(key)
        if cached is not None:
            return cached
        if key in self._active:
            return ()
        self._active.add(key)
        out: list[Contribution] = []
        expression = scope.expression
        if isinstance(expression, exp.SetOperation):
            for branch in scope.set_operation_scopes:
                out.extend(self.projection(branch, index))
        elif isinstance(expression, exp.Select):
            projections = expression.expressions
            if index < len(projections):
                self._visit(projections[index], scope, _START, out)
        else:
            # A table function (UNNEST, LATERAL FLATTEN, ...): its columns transform its arguments.
            self._visit(expression, scope, self._transformed(_START, expression), out)
        self._active.discard(key)
        result = tuple(out)
        self._projection_memo[key] = result
        return result

    @staticmethod
    def state(kind: str, note: Note) -> _State:
        """An INDIRECT position of subtype ``kind`` (for conditions the engine adds, like MERGE's)."""
        return _State(kind, kind, False, note)

    def root_projection(self, index: int) -> tuple[Contribution, ...]:
        return self.projection(self._root, index)

    def root_rows(self) -> tuple[Contribution, ...]:
        """Dataset-level contributions of the writing query: JOIN, FILTER, GROUP_BY, SORT."""
        out = list(self.dataset_lineage(self._root))
        order = self._root.expression.args.get("order")
        if isinstance(order, exp.Order):
            for ordered in order.expressions:
                key = ordered.this if isinstance(ordered, exp.Ordered) else ordered
                desc = bool(ordered.args.get("desc")) if isinstance(ordered, exp.Ordered) else False
                state = _State("SORT", "SORT", False, Note(condition=self._render(key), sort_desc=desc))
                self._visit(key, self._root, state, out)
        return tuple(out)

    def column_lineage(self, scope: Scope, name: str) -> tuple[Contribution, ...]:
        """Contributions to the column ``name`` that ``scope`` exposes to its parent."""
        expression = scope.expression
        if not isinstance(expression, exp.Query):
            return self.projection(scope, 0)
        names = expression.named_selects
        index = _index_of(names, name)
        if index is not None:
            return self.projection(scope, index)
        if isinstance(expression, exp.Select):
            return self._through_star(scope, expression, name)
        return ()

    def dataset_lineage(self, scope: Scope) -> tuple[Contribution, ...]:
        """Row-deciding contributions of ``scope`` and of every scope it reads rows from."""
        key = id(scope)
        cached = self._dataset_memo.get(key)
        if cached is not None:
            return cached
        self._dataset_memo[key] = ()  # guards recursive CTE cycles
        out: list[Contribution] = []
        expression = scope.expression
        if isinstance(expression, exp.SetOperation):
            for branch in scope.set_operation_scopes:
                out.extend(self.dataset_lineage(branch))
        elif isinstance(expression, exp.Select):
            self._select_rows(scope, expression, out)
        result = tuple(out)
        self._dataset_memo[key] = result
        return result

    # ----- rows -----

    def _select_rows(self, scope: Scope, select: exp.Select, out: list[Contribution]) -> None:
        for _name, (_node, source) in scope.selected_sources.items():
            if isinstance(source, Scope):
                out.extend(self.dataset_lineage(source))
            else:
                binding = self._bindings.get(source.name)
                if binding is not None and binding.kind == "virtual" and binding.virtual is not None:
                    out.extend(binding.virtual.dataset)
        from_ = select.args.get("from_")
        left = self._label(from_.this) if isinstance(from_, exp.From) else "the query"
        for join in select.args.get("joins") or []:
            on = join.args.get("on")
            if on is None:
                continue
            clause = f"`{left}` are joined to `{self._label(join.this)}`"
            state = _State("JOIN", "JOIN", False, Note(condition=self._render(on), clause=clause))
            self._visit(on, scope, state, out)
        where = select.args.get("where")
        if isinstance(where, exp.Where):
            for conjunct in _conjuncts(where.this):
                note = Note(condition=self._render(conjunct), clause="rows")
                self._visit(conjunct, scope, _State("FILTER", "FILTER", False, note), out)
        group = select.args.get("group")
        if isinstance(group, exp.Group):
            keys = self._group(scope)[0]
            for child in _group_keys(select, group):
                note = Note(group_keys=keys, condition=self._render(child))
                self._visit(child, scope, _State("GROUP_BY", "GROUP_BY", False, note), out)
        for clause_name, clause in (("having", "groups"), ("qualify", "rows")):
            node = select.args.get(clause_name)
            if isinstance(node, (exp.Having, exp.Qualify)):
                for conjunct in _conjuncts(node.this):
                    note = Note(condition=self._render(conjunct), clause=clause)
                    self._visit(conjunct, scope, _State("FILTER", "FILTER", False, note), out)
        order = select.args.get("order")
        if scope is not self._root and isinstance(order, exp.Order) and select.args.get("limit"):
            keys_text = ", ".join(self._render(o) for o in order.expressions)
            note = Note(condition=keys_text, clause="top")
            self._visit(order, scope, _State("FILTER", "FILTER", False, note), out)

    def _group(self, scope: Scope) -> tuple[tuple[str, ...], str | None]:
        """The rendered GROUP BY keys and WHERE condition of a scope (for aggregate sentences)."""
        key = id(scope)
        cached = self._group_memo.get(key)
        if cached is not None:
            return cached
        keys: tuple[str, ...] = ()
        condition: str | None = None
        select = scope.expression
        if isinstance(select, exp.Select):
            group = select.args.get("group")
            if isinstance(group, exp.Group):
                keys = tuple(self._render(child) for child in _group_keys(select, group))
            where = select.args.get("where")
            if isinstance(where, exp.Where):
                condition = self._render(where.this)
        self._group_memo[key] = (keys, condition)
        return keys, condition

    def _label(self, node: exp.Expr) -> str:
        if isinstance(node, exp.Table):
            binding = self._bindings.get(node.name)
            if binding is not None:
                return binding.label
            written = node.meta.get(WRITTEN)  # a CTE, named as the author wrote it
            return str(written[-1][0]) if written else node.name
        return node.alias_or_name or "a subquery"

    # ----- expressions -----

    def _visit(self, node: exp.Expr, scope: Scope, state: _State, out: list[Contribution]) -> None:
        if type(node) is exp.Column:
            self._column(node, scope, state, out)
            return
        if isinstance(node, _LEAVES):
            return
        if isinstance(node, (exp.Alias, exp.Paren)):
            self._visit(node.this, scope, state, out)
            return
        if isinstance(node, (exp.Subquery, exp.Query)):
            self._subquery(node, scope, state, out)
            return
        if isinstance(node, exp.Window):
            self._window(node, scope, state, out)
            return
        if isinstance(node, exp.If):
            condition = node.this
            self._visit(condition, scope, self._conditional(state, condition), out)
            inner = self._transformed(state, node)
            for branch in (node.args.get("true"), node.args.get("false")):
                if isinstance(branch, exp.Expr):
                    self._visit(branch, scope, inner, out)
            return
        if isinstance(node, exp.Case):
            inner = self._transformed(state, node)
            operand = node.this
            if isinstance(operand, exp.Expr):
                self._visit(operand, scope, self._conditional(state, operand), out)
            for branch in node.args.get("ifs") or []:
                self._visit(branch, scope, inner, out)
            default = node.args.get("default")
            if isinstance(default, exp.Expr):
                self._visit(default, scope, inner, out)
            return
        if isinstance(node, exp.Nullif):
            inner = self._transformed(state, node)
            self._visit(node.this, scope, inner, out)
            other = node.expression
            if isinstance(other, exp.Expr):
                self._visit(other, scope, self._conditional(state, node), out)
            return
        if isinstance(node, exp.Filter):
            self._visit(node.this, scope, state, out)
            where = node.expression
            condition = where.this if isinstance(where, exp.Where) else where
            if isinstance(condition, exp.Expr):
                self._visit(condition, scope, self._conditional(state, condition), out)
            return
        if isinstance(node, exp.WithinGroup):
            self._visit(node.this, scope, state, out)
            order = node.expression
            if isinstance(order, exp.Order):
                keys = ", ".join(
                    self._render(o.this if isinstance(o, exp.Ordered) else o) for o in order.expressions
                )
                sort = self._indirect(state, "SORT", Note(condition=keys))
                self._visit(order, scope, sort, out)
            return
        if isinstance(node, exp.Coalesce) and self._is_using(node, scope):
            for argument in node.iter_expressions():
                self._visit(argument, scope, state, out)
            return
        if isinstance(node, exp.AggFunc) and not isinstance(node, _NAVIGATION_TYPES):
            inner = self._aggregated(state, node, scope)
        elif is_masking(node):
            inner = self._masked(state, node)
        else:
            inner = self._transformed(state, node)
        for child in node.iter_expressions():
            self._visit(child, scope, inner, out)

    def _window(self, node: exp.Window, scope: Scope, state: _State, out: list[Contribution]) -> None:
        partition = [p for p in node.args.get("partition_by") or [] if isinstance(p, exp.Expr)]
        order = node.args.get("order")
        ordered = list(order.expressions) if isinstance(order, exp.Order) else []
        phrase = window_phrase(
            tuple(self._render(p) for p in partition),
            tuple(self._ordered_text(o) for o in ordered),
        )
        function_state = state
        if state.kind == DIRECT:
            note = state.note
            function_state = _State(
                DIRECT,
                state.subtype,
                state.masking,
                Note(
                    expression=note.expression,
                    masking=note.masking,
                    masking_is_whole=note.masking_is_whole,
                    window=phrase,
                ),
            )
        self._visit(node.this, scope, function_state, out)
        window_state = self._indirect(state, "WINDOW", Note(window=phrase))
        for key in partition:
            self._visit(key, scope, window_state, out)
        for key in ordered:
            self._visit(key, scope, window_state, out)

    def _ordered_text(self, node: exp.Expr) -> tuple[str, bool]:
        if isinstance(node, exp.Ordered):
            return self._render(node.this), bool(node.args.get("desc"))
        return self._render(node), False

    def _is_using(self, node: exp.Coalesce, scope: Scope) -> bool:
        using = scope.expression.meta.get(USING_META)
        if not using:
            return False
        arguments = list(node.iter_expressions())
        names = {a.name.casefold() for a in arguments if isinstance(a, exp.Column)}
        return (
            len(names) == 1
            and len(arguments) >= 2
            and all(isinstance(a, exp.Column) for a in arguments)
            and (next(iter(names)) in using)
        )

    # ----- states -----

    def _transformed(self, state: _State, node: exp.Expr) -> _State:
        if state.kind != DIRECT:
            return state
        note = state.note
        if note.expression is not None and state.subtype != "IDENTITY":
            return state
        subtype = "TRANSFORMATION" if state.subtype == "IDENTITY" else state.subtype
        expression = note.expression or self._render(node)
        return _State(
            DIRECT,
            subtype,
            state.masking,
            Note(
                expression=expression,
                masking=note.masking,
                masking_is_whole=note.masking_is_whole,
                aggregate=note.aggregate,
                argument=note.argument,
                window=note.window,
                group_keys=note.group_keys,
                filter=note.filter,
            ),
        )

    def _masked(self, state: _State, node: exp.Expr) -> _State:
        if state.kind != DIRECT:
            return state
        whole = state.note.expression is None
        base = self._transformed(state, node)
        note = base.note
        if note.masking:
            return _State(DIRECT, base.subtype, True, note)
        return _State(
            DIRECT,
            base.subtype,
            True,
            Note(
                expression=note.expression,
                masking=masking_words(node),
                masking_is_whole=whole,
                aggregate=note.aggregate,
                argument=note.argument,
                window=note.window,
                group_keys=note.group_keys,
                filter=note.filter,
            ),
        )

    def _aggregated(self, state: _State, node: exp.Expr, scope: Scope) -> _State:
        if state.kind != DIRECT:
            return state
        note = state.note
        if note.aggregate is not None:
            return state  # the outermost aggregate describes the value
        argument_node = node.this
        if isinstance(argument_node, exp.Distinct) and argument_node.expressions:
            argument_node = argument_node.expressions[0]
        argument = None
        if isinstance(argument_node, exp.Expr) and not isinstance(argument_node, exp.Column):
            argument = self._render(argument_node)
        keys, condition = ((), None) if note.window else self._group(scope)
        if note.window:
            condition = self._group(scope)[1]
        return _State(
            DIRECT,
            "AGGREGATION",
            state.masking or _is_count(node),
            Note(
                expression=note.expression or self._render(node),
                masking=note.masking,
                masking_is_whole=note.masking_is_whole,
                aggregate=aggregate_words(node),
                argument=argument,
                window=note.window,
                group_keys=keys,
                filter=condition,
            ),
        )

    def _conditional(self, state: _State, condition: exp.Expr) -> _State:
        return self._indirect(state, "CONDITIONAL", Note(condition=self._render(condition)))

    @staticmethod
    def _indirect(state: _State, subtype: str, note: Note) -> _State:
        if state.kind != DIRECT:
            return state  # already in a row-deciding or conditional position: that is what it is
        return _State(subtype, subtype, False, note)

    # ----- columns -----

    def _emit(self, source: Source, state: _State, out: list[Contribution]) -> None:
        if state.kind == DIRECT:
            out.append(Contribution(source, DIRECT, state.subtype, state.masking, state.note))
        else:
            out.append(Contribution(source, INDIRECT, state.kind, False, state.note))

    def _column(self, node: exp.Column, scope: Scope, state: _State, out: list[Contribution]) -> None:
        if isinstance(node.this, exp.Star):
            return
        name = node.name
        table = node.table
        if not table:
            self._unqualified(node, scope, state, out)
            return
        source = _find_source(scope, table)
        if source is None:
            self._problem(f"Column `{table}.{name}` refers to no table of its query.")
            return
        self._from_source(source, name, state, out)

    def _from_source(
        self, source: exp.Table | Scope, name: str, state: _State, out: list[Contribution]
    ) -> None:
        if isinstance(source, Scope):
            for inner in self.column_lineage(source, name):
                out.append(compose(state, inner))
            return
        binding = self._bindings.get(source.name)
        if binding is None:
            return
        if binding.kind == "dataset":
            self._emit(Source(binding.namespace, binding.name, binding.field_name(name)), state, out)
        elif binding.kind == "virtual" and binding.virtual is not None:
            for inner in binding.virtual.lineage.get(name.casefold(), ()):
                out.append(compose(state, inner))

    def _unqualified(self, node: exp.Column, scope: Scope, state: _State, out: list[Contribution]) -> None:
        name = node.name
        expression = scope.expression
        # ORDER BY may name a projection by its alias (qualify leaves those unqualified).
        if isinstance(expression, exp.Query):
            index = _index_of(expression.named_selects, name)
            if index is not None and (id(scope), index) not in self._active:
                for inner in self.projection(scope, index):
                    out.append(compose(state, inner))
                return
        sources = [source for _n, (_node, source) in scope.selected_sources.items()]
        # A table whose schema names the column is better evidence than tables whose schema is unknown.
        candidates = [
            s for s in sources if not _unknown(s, self._bindings) and _has_column(s, name, self._bindings)
        ]
        if not candidates:
            candidates = [s for s in sources if _unknown(s, self._bindings)]
        if len(candidates) == 1:
            self._from_source(candidates[0], name, state, out)
            return
        if not scope.selected_sources and scope.parent is not None:
            self._unqualified(node, scope.parent, state, out)
            return
        self._problem(f"Column `{name}` could not be attributed to one table: no schema names it.")

    def _through_star(self, scope: Scope, select: exp.Select, name: str) -> tuple[Contribution, ...]:
        # A star qualify could not expand (its table has no known schema): the column passes through it.
        sources: list[exp.Table | Scope] = []
        for projection in select.expressions:
            if isinstance(projection, exp.Star):
                sources.extend(source for _n, (_node, source) in scope.selected_sources.items())
            elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
                found = _find_source(scope, projection.table)
                if found is not None:
                    sources.append(found)
        if not sources:
            return ()
        unknown = [s for s in sources if _unknown(s, self._bindings)]
        known = [
            s for s in sources if not _unknown(s, self._bindings) and _has_column(s, name, self._bindings)
        ]
        chosen = known if len(known) == 1 else unknown if len(unknown) == 1 and not known else []
        if not chosen:
            self._problem(
                f"Column `{name}` comes from a `*` over several tables and could not be attributed."
            )
            return ()
        out: list[Contribution] = []
        self._from_source(chosen[0], name, _START, out)
        return tuple(out)

    def _subquery(self, node: exp.Expr, scope: Scope, state: _State, out: list[Contribution]) -> None:
        inner_query = node.unnest() if isinstance(node, exp.Subquery) else node
        sub = self._scopes.get(id(inner_query))
        if sub is None:
            return
        expression = sub.expression
        count = len(expression.named_selects) if isinstance(expression, exp.Query) else 1
        if isinstance(expression, exp.Select):
            count = len(expression.expressions)
        for index in range(count):
            for inner in self.projection(sub, index):
                out.append(compose(state, inner))
        for inner in self.dataset_lineage(sub):
            out.append(compose(state, inner))

    def _problem(self, text: str) -> None:
        if text not in self._reported:
            self._reported.add(text)
            self._problems.append(text)


def _group_keys(select: exp.Select, group: exp.Group) -> list[exp.Expr]:
    """The grouping keys; ``GROUP BY ALL`` groups by every projection without an aggregate."""
    if group.args.get("all"):
        return [
            p.unalias()
            for p in select.expressions
            if not p.find(exp.AggFunc) and not isinstance(p.unalias(), exp.Literal)
        ]
    return list(group.iter_expressions())


def _index_of(names: Iterable[str], name: str) -> int | None:
    listed = list(names)
    for index, candidate in enumerate(listed):
        if candidate == name:
            return index
    folded = name.casefold()
    for index, candidate in enumerate(listed):
        if candidate.casefold() == folded:
            return index
    return None


def _find_source(scope: Scope, table: str) -> exp.Table | Scope | None:
    current: Scope | None = scope
    while current is not None:
        source = current.sources.get(table)
        if source is not None:
            return source
        current = current.parent
    return None


def _unknown(source: exp.Table | Scope, bindings: Mapping[str, Binding]) -> bool:
    """Whether the source's columns are unknown (so an unattributed column may be one of them)."""
    if isinstance(source, Scope):
        expression = source.expression
        return isinstance(expression, exp.Select) and any(
            isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
            for p in expression.expressions
        )
    binding = bindings.get(source.name)
    if binding is None:
        return True
    return binding.known_columns() is None


def _has_column(source: exp.Table | Scope, name: str, bindings: Mapping[str, Binding]) -> bool:
    if isinstance(source, Scope):
        expression = source.expression
        return isinstance(expression, exp.Query) and _index_of(expression.named_selects, name) is not None
    binding = bindings.get(source.name)
    columns = binding.known_columns() if binding is not None else None
    return columns is not None and any(c.casefold() == name.casefold() for c in columns)
