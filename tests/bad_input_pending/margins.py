"""Pending bad-input cases: margins (see the package docstring)."""

NUMPY = {}

OTHER = {}
