"""The OpenLineage ingest API (``POST /api/v1/lineage``), authenticated by organization API keys."""
