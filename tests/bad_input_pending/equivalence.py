"""Pending bad-input cases: equivalence (see the package docstring)."""

NUMPY = {
}

OTHER = {
}
