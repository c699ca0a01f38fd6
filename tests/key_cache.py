"""The API key cache of this test process, once its listener is listening (it starts on first use)."""

from __future__ import annotations

from lineage_core.accounts.key_cache import KeyCache, cache_for
from tests.faults import wait_for


def listening_key_cache(database_url: str) -> KeyCache:
    cache = cache_for(database_url)
    assert cache is not None, "PostgreSQL only"
    wait_for(lambda: cache.listening, "the API key cache to listen", 30)
    return cache
