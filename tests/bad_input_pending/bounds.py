"""Pending bad-input cases: bounds (see the package docstring)."""

NUMPY = {}

OTHER = {}
