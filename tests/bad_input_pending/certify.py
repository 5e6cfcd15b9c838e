"""Pending bad-input cases: certify (see the package docstring)."""

NUMPY = {}

OTHER = {}
