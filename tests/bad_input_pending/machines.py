"""Pending bad-input cases: machines (see the package docstring)."""

NUMPY = {
}

OTHER = {
}
