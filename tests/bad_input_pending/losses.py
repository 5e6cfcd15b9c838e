"""Pending bad-input cases: losses (see the package docstring)."""

NUMPY = {}

OTHER = {}
