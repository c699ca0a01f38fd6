"""Benchmarks that print tables; run by hand, never part of the test suite."""
