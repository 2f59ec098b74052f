"""Benchmarks: standalone scripts that print figures and ratios (none is a pass/fail test)."""
