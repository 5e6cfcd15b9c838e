"""Pending bad-input cases: nets (see the package docstring)."""

NUMPY = {}

OTHER = {}
