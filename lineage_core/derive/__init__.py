"""Column lineage and plain-English explanations derived from a job's SQL.

Pure logic: imports only the standard library and sqlglot. Entry point :func:`derive`; value types
:class:`DatasetSchema`, :class:`DerivedEdge`, :class:`Derivation`. Modules, one job each:
``dialects`` (OpenLineage dialect strings to sqlglot's), ``statements`` (split, parse, what each
statement writes), ``tables`` (SQL tables to declared datasets), ``walk`` (edges from the qualified
scopes), ``explain`` (the English), ``edges`` (dedupe and order), ``engine`` (the entry point).
"""

from lineage_core.derive.engine import derive
from lineage_core.derive.model import DatasetSchema, Derivation, DerivedEdge

__all__ = ["DatasetSchema", "Derivation", "DerivedEdge", "derive"]
