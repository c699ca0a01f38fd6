"""Imports every module that defines tables, so ``Base.metadata`` is complete (Alembic, tests)."""

from lineage_core import models  # noqa: F401
