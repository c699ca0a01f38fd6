"""The derivation tests need no services: nothing here, on purpose (pure functions only)."""
