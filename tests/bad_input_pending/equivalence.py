"""Pending bad-input cases: equivalence (see the package docstring)."""

NUMPY = {
    'equivalence.compare|x_test|1e300': 'pending fix in ntkref/equivalence.py: silent non-finite result: array([[ 0., 0.],',
    'equivalence.compare|x_test|empty': "pending fix in ntkref/equivalence.py: ValueError does not name ['x', 'y', 'x_test', 'params']: zero-size array to reduction operation maximum which ",
    'equivalence.compare|y|1e300': "pending fix in ntkref/equivalence.py: InvalidParameterError does not name ['y']: The 'z' parameter contains NaN or infinite values.",
}

OTHER = {
    'equivalence.compare|params|array': 'pending fix in ntkref/equivalence.py (non-NumPy backends): IndexError: self.ndim=2, but the multi-axes index only specifies 1 dimensions. If this was intentional, add a ',
}
