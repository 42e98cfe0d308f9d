"""Benchmarks: each ``bench_*.py`` module prints a table against a baseline measured in the same run."""
