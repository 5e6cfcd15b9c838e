"""Pending bad-input cases: mean_field (see the package docstring)."""

NUMPY = {}

OTHER = {}
