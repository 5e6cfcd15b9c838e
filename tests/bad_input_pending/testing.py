"""Pending bad-input cases: testing (see the package docstring)."""

NUMPY = {
}

OTHER = {
}
