"""Pending bad-input cases: kernels (see the package docstring)."""

NUMPY = {}

OTHER = {}
