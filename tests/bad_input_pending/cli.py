"""Pending bad-input cases: cli (see the package docstring)."""

NUMPY = {
}

OTHER = {
}
