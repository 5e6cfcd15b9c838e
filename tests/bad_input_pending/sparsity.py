"""Pending bad-input cases: sparsity (see the package docstring)."""

NUMPY = {}

OTHER = {}
