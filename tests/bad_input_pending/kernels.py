"""Pending bad-input cases: kernels (see the package docstring)."""

NUMPY = {
    'kernels.cntk|W_std|0.0': 'pending fix in ntkref/kernels/_cntk.py: no error raised',
}

OTHER = {
    'kernels.cntk|x1|namespace': 'pending fix in ntkref/kernels.py (non-NumPy backends): Arrays are not equal',
}
