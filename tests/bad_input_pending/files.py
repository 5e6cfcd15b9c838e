"""Pending bad-input cases: files (see the package docstring)."""

NUMPY = {
}

OTHER = {}
