"""Pending bad-input cases: regularizers (see the package docstring)."""

NUMPY = {
}

OTHER = {}
