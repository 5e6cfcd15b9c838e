"""Pending bad-input cases: adversarial (see the package docstring)."""

NUMPY = {
}

OTHER = {
}
