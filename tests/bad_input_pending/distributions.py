"""Pending bad-input cases: distributions (see the package docstring)."""

NUMPY = {
}

OTHER = {
}
