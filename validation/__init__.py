"""Reproductions of the seeds' experiments and benchmarks (see the README)."""
