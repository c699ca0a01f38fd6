"""Imports every module that defines tables, so ``Base.metadata`` is complete (Alembic, tests)."""

from lineage_core.infra import models  # noqa: F401
from lineage_core.lineage import models as lineage_models  # noqa: F401
