"""The public entry point: :func:`derive` column lineage and explanations from a job's SQL.

Per statement: parse (on its own, so one bad statement does not hide the others), find what it
writes, match every table it reads to the declared datasets, qualify it once with a schema built
from the declared fields, walk its scopes (:mod:`lineage_core.derive.walk`) and explain each edge
(:mod:`lineage_core.derive.explain`).

Which statements count:

* When the job declared outputs, a statement counts when it writes one of them (``INSERT``,
  ``CREATE ... AS``, ``MERGE``, ``UPDATE``), or when it is a bare query and exactly one output was
  declared (dbt and many producers send the model's SELECT alone). A statement writing an
  undeclared table (a temp table, a staging intermediate) is followed through: later statements that
  read that table get lineage to the columns it was built from, as if it were a CTE.
* When the job declared no outputs, every writing statement counts and its target is derived by the
  namespace rule of :mod:`lineage_core.derive.tables`; the same for inputs when none were declared.
* USE, SET, BEGIN/COMMIT, DROP, INSERT ... VALUES and other statements that move no data are
  understood and yield nothing. Anything else (DELETE, procedural code, ...) is reported.

Which tables read count: a declared input (columns become edges), an earlier statement's
intermediate (followed through), the written table itself (MERGE/UPDATE targets, self-reads: no
edges), else ``unmatched_tables`` (no edges, never invented) when some datasets were declared, or a
derived dataset when none were.

``derive`` never raises: anything unexpected becomes a sentence in ``problems``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import build_scope
from sqlglot.schema import MappingSchema

from lineage_core.derive.dialects import resolve_dialect
from lineage_core.derive.edges import OutputLineage, assemble
from lineage_core.derive.explain import ALIAS_ADDED, Note, Renderer, remember_written
from lineage_core.derive.facts import Binding, Contribution, Virtual
from lineage_core.derive.model import DatasetSchema, Derivation
from lineage_core.derive.prepare import prepare
from lineage_core.derive.statements import SELF_TABLE, Plan, is_inert, parse_statements, plan
from lineage_core.derive.tables import Catalog, TableName, table_name
from lineage_core.derive.walk import Walker, compose


def derive(
    query: str,
    dialect: str | None,
    *,
    inputs: Sequence[DatasetSchema],
    outputs: Sequence[DatasetSchema],
    job_namespace: str,
) -> Derivation:
    """Column lineage, table lineage and explanations for one job's SQL. Never raises.

    ``dialect`` is the OpenLineage ``sql`` facet's dialect string (any case); unknown or missing
    means sqlglot's generic dialect. ``inputs``/``outputs`` are the datasets the job declared, with
    their schemas when known; ``job_namespace`` names datasets derived when none were declared.
    The result is deterministic: the same arguments give an equal :class:`Derivation`.
    """
    try:
        return _Run(query, dialect, tuple(inputs), tuple(outputs), job_namespace).run()
    except Exception as error:  # the contract is to report, never to raise (RecursionError included)
        return Derivation(
            edges=(),
            inputs=(),
            outputs=(),
            unmatched_tables=(),
            problems=(f"The SQL could not be analysed: {type(error).__name__}: {_first_line(error)}.",),
            status="failed",
        )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().split("\n")[0].rstrip(".")
    return text or "no detail"


def _kind(tree: exp.Expr) -> str:
    return tree.key.upper()


class _Run:
    """One call of :func:`derive`: its state across the query's statements."""

    def __init__(
        self,
        query: str,
        dialect: str | None,
        inputs: tuple[DatasetSchema, ...],
        outputs: tuple[DatasetSchema, ...],
        job_namespace: str,
    ) -> None:
        self.query = query
        self.given_dialect = dialect
        self.dialect = resolve_dialect(dialect)
        self.inputs = inputs
        self.outputs = outputs
        self.declared = bool(inputs or outputs)
        self.job_namespace = job_namespace
        self.in_catalog = Catalog(inputs, self.dialect)
        self.out_catalog = Catalog(outputs, self.dialect)
        self.problems: list[str] = []
        self.read: dict[tuple[str, str], None] = {}
        self.written: dict[tuple[str, str], OutputLineage] = {}
        self.unmatched: dict[str, None] = {}
        self.virtuals: dict[tuple[str, ...], Virtual] = {}
        self.renderer = Renderer(self.dialect)
        self.prefix = ""

    # ----- the whole query -----

    def run(self) -> Derivation:
        if not isinstance(self.query, str) or not self.query.strip():
            return self._result(["The job has no SQL to derive lineage from."])
        hint = ""
        if self.dialect is None:
            hint = (
                f" (the dialect `{self.given_dialect}` is unknown, so the generic dialect was used)"
                if self.given_dialect
                else " (no dialect was given, so the generic dialect was used)"
            )
        parsed, token_error = parse_statements(self.query, self.dialect, hint)
        if token_error is not None:
            return self._result([token_error])
        if not parsed:
            return self._result(["The SQL holds no statement (only separators or comments)."])
        several = len(parsed) > 1
        for statement in parsed:
            self.prefix = f"Statement {statement.number}: " if several else ""
            if statement.error is not None:
                self.problems.append(statement.error)
                continue
            tree = statement.tree
            if tree is None or is_inert(tree):
                continue
            try:
                self._statement(tree)
            except (SqlglotError, RecursionError, ValueError, KeyError, TypeError, AttributeError) as error:
                self._problem(
                    f"the statement could not be analysed: {type(error).__name__}: {_first_line(error)}."
                )
        return self._result([])

    def _result(self, extra: list[str]) -> Derivation:
        problems = tuple(self.problems + extra)
        edges = assemble(list(self.written.values()))
        inputs = tuple(self.read)
        outputs = tuple(self.written)
        if not problems:
            status = "derived"
        elif edges or inputs or outputs:
            status = "partial"
        else:
            status = "failed"
        return Derivation(edges, inputs, outputs, tuple(self.unmatched), problems, status)

    def _problem(self, text: str) -> None:
        sentence = self.prefix + text if self.prefix else text[0].upper() + text[1:]
        if sentence not in self.problems:
            self.problems.append(sentence)

    # ----- one statement -----

    def _statement(self, tree: exp.Expr) -> None:
        statement_plan = plan(tree)
        if statement_plan is None:
            self._problem(f"{_kind(tree)} statements are not supported; no lineage was derived from it.")
            return
        target = self._target(statement_plan)
        if target is None:
            return
        output, virtual_key, target_label = target
        query = statement_plan.query
        remember_written(query)
        bindings = self._bind(query, target_label)
        prepare(query, bindings)
        schema = MappingSchema(
            {
                synthetic: dict.fromkeys(known, "UNKNOWN")
                for synthetic, binding in bindings.items()
                if (known := binding.known_columns()) is not None
            },
            dialect=self.dialect,
        )
        qualified = qualify(
            query,
            dialect=self.dialect,
            schema=schema,
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        root = build_scope(qualified)
        if root is None:
            self._problem("the statement's query could not be scoped; no lineage was derived from it.")
            return
        problems: list[str] = []
        walker = Walker(root, bindings, self.renderer, problems)
        names = walker.output_names()
        self._report_stars(qualified, bindings)
        columns = self._target_columns(statement_plan, names, output)
        rows = walker.root_rows()
        lineage: dict[str, tuple[Contribution, ...]] = {}
        ordered: list[str] = []
        for index, column in columns:
            contributions = list(walker.root_projection(index))
            for guard in statement_plan.conditions.get(index, []):
                contributions.extend(self._guarded(walker, qualified, guard))
            if column.casefold() not in lineage:
                ordered.append(column)
                lineage[column.casefold()] = ()
            lineage[column.casefold()] += tuple(contributions)
        for text in problems:
            self._problem(text[0].lower() + text[1:] if self.prefix else text)
        if output is not None:
            for column in ordered:
                output.add_field(column, lineage[column.casefold()])
            output.rows.extend(rows)
        elif virtual_key is not None:
            previous = self.virtuals.get(virtual_key)
            if previous is not None:  # INSERT into a temp table created earlier: both feed it
                for column in ordered:
                    key = column.casefold()
                    previous.lineage[key] = previous.lineage.get(key, ()) + lineage[key]
                    if column not in previous.columns:
                        previous.columns.append(column)
                previous.dataset = previous.dataset + rows
            else:
                self.virtuals[virtual_key] = Virtual(ordered, lineage, rows)

    def _guarded(self, walker: Walker, qualified: exp.Query, index: int) -> list[Contribution]:
        # A MERGE clause's ``WHEN ... AND <condition>`` decides the values it assigns.
        projection = qualified.expressions[index] if isinstance(qualified, exp.Select) else None
        if projection is None:
            return []
        note = Note(condition=self.renderer.sql(projection))
        state = walker.state("CONDITIONAL", note)
        return [compose(state, c) for c in walker.root_projection(index)]

    def _target(
        self, statement_plan: Plan
    ) -> tuple[OutputLineage | None, tuple[str, ...] | None, str] | None:
        """Where the statement's rows go: a declared/derived output, or an intermediate's key."""
        if statement_plan.target is None:
            if len(self.outputs) == 1:
                dataset = self.outputs[0]
                return self._output(dataset.namespace, dataset.name), None, dataset.name
            if self.outputs:
                self._problem(
                    "a bare query cannot be attributed to one of the several declared outputs; "
                    "no column lineage was derived from it."
                )
                self._bind(statement_plan.query, "")  # still report what it reads
                return None
            self._bind(statement_plan.query, "")
            return None
        name = table_name(statement_plan.target)
        if name is None:
            self._problem("the written table has no plain name; no lineage was derived from it.")
            return None
        if self.outputs:
            match = self.out_catalog.match(name)
            if match.dataset is not None:
                return self._output(match.dataset.namespace, match.dataset.name), None, match.dataset.name
            if match.candidates:
                self._ambiguous(name, match.candidates)
                return None
            if statement_plan.kind in ("insert", "create"):
                return None, name.key(self.dialect), name.written
            return None  # writes an undeclared table we cannot follow: not this job's lineage
        stored = name.stored(self.dialect)
        return self._output(self.job_namespace, stored), None, stored

    def _output(self, namespace: str, name: str) -> OutputLineage:
        key = (namespace, name)
        output = self.written.get(key)
        if output is None:
            output = OutputLineage(namespace, name)
            self.written[key] = output
        return output

    def _ambiguous(self, name: TableName, candidates: Sequence[DatasetSchema]) -> None:
        listed = ", ".join(f"`{c.name}`" for c in candidates)
        self._problem(
            f"the table `{name.written}` matches several declared datasets ({listed}); it was not used."
        )

    # ----- tables -----

    def _bind(self, query: exp.Expr, target_label: str) -> dict[str, Binding]:
        """Give every physical table of ``query`` a synthetic name and say what it stands for.

        Renaming to ``__<n>`` (keeping the original name as the alias) lets one flat schema describe
        tables written with any number of name parts, and keeps qualify() from re-folding names.
        """
        ctes = {cte.alias_or_name.casefold() for cte in query.find_all(exp.CTE)}
        bindings: dict[str, Binding] = {}
        for table in list(query.find_all(exp.Table)):
            if not isinstance(table.this, exp.Identifier):
                continue
            name = table_name(table)
            if name is None:
                continue
            if table.meta.get(SELF_TABLE):
                binding = Binding("self", target_label)
            elif len(name.parts) == 1 and name.parts[0][0].casefold() in ctes:
                continue
            else:
                binding = self._read(name)
            synthetic = f"__{len(bindings)}"
            bindings[synthetic] = binding
            if not table.args.get("alias"):
                last, quoted = name.parts[-1]
                table.set("alias", exp.TableAlias(this=exp.to_identifier(last, quoted=quoted)))
                table.meta[ALIAS_ADDED] = True
            table.set("this", exp.to_identifier(synthetic, quoted=True))
            table.set("db", None)
            table.set("catalog", None)
        return bindings

    def _read(self, name: TableName) -> Binding:
        if not self.declared:
            stored = name.stored(self.dialect)
            self.read.setdefault((self.job_namespace, stored), None)
            return Binding("dataset", stored, self.job_namespace, stored)
        match = self.in_catalog.match(name)
        if match.dataset is not None:
            dataset = match.dataset
            self.read.setdefault((dataset.namespace, dataset.name), None)
            spelling = {f.casefold(): f for f in reversed(dataset.fields)}
            return Binding(
                "dataset", dataset.name, dataset.namespace, dataset.name, dataset.fields, None, spelling
            )
        if match.candidates:
            self._ambiguous(name, match.candidates)
            return Binding("unmatched", name.written)
        virtual = self.virtuals.get(name.key(self.dialect))
        if virtual is not None:
            return Binding("virtual", name.written, virtual=virtual)
        own = self.out_catalog.match(name)
        if own.dataset is not None:
            return Binding("self", own.dataset.name)
        self.unmatched.setdefault(name.written, None)
        return Binding("unmatched", name.written)

    # ----- columns -----

    def _target_columns(
        self, statement_plan: Plan, names: list[str], output: OutputLineage | None
    ) -> list[tuple[int, str]]:
        """(projection index, output column name) pairs, in output column order."""
        declared = self._declared_fields(output)
        spelling = {f.casefold(): f for f in reversed(declared)}
        values = statement_plan.value_projections
        count = len(names) if values is None else values
        if statement_plan.columns is not None:
            listed = [self._normalize(ident) for ident in statement_plan.columns]
            if len(listed) != count:
                self._problem(
                    f"the statement names {len(listed)} target columns but its query has {count}; "
                    "columns were matched by position as far as both go."
                )
            pairs = list(enumerate(listed[:count]))
        elif statement_plan.kind == "insert" and declared:
            if len(declared) != count:
                self._problem(
                    f"the query has {count} columns but `{output.name if output else ''}` declares "
                    f"{len(declared)}; columns were matched by position as far as both go."
                )
            pairs = list(enumerate(declared[:count]))
        else:
            pairs = list(enumerate(names[:count]))
        result: list[tuple[int, str]] = []
        for index, column in pairs:
            if column.startswith("*"):
                continue
            result.append((index, spelling.get(column.casefold(), column)))
        return result

    def _declared_fields(self, output: OutputLineage | None) -> tuple[str, ...]:
        if output is None:
            return ()
        for dataset in self.outputs:
            if (dataset.namespace, dataset.name) == (output.namespace, output.name):
                return dataset.fields
        return ()

    def _normalize(self, ident: exp.Identifier) -> str:
        normalized = Dialect.get_or_raise(self.dialect).normalize_identifier(ident.copy())
        return normalized.name

    def _report_stars(self, qualified: exp.Expr, bindings: dict[str, Binding]) -> None:
        select = qualified
        while isinstance(select, exp.SetOperation):
            select = select.this
        if not isinstance(select, exp.Select):
            return
        for projection in select.expressions:
            if isinstance(projection, exp.Star) or (
                isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
            ):
                unknown = sorted(
                    b.label for b in bindings.values() if b.kind != "self" and b.known_columns() is None
                )
                which = ", ".join(f"`{label}`" for label in unknown) or "its tables"
                self._problem(
                    f"`*` could not be expanded: no schema is known for {which}; "
                    "the columns it selects have no lineage."
                )
                return
