"""Pending bad-input cases: dynamics (see the package docstring)."""

NUMPY = {}

OTHER = {}
