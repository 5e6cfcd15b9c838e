"""Pending bad-input cases: kernels (see the package docstring)."""

NUMPY = {
    'kernels.Activation|derivative|bogus': 'pending fix in ntkref/kernels/__init__.py: no error raised',
    'kernels.Activation|fn|bogus': 'pending fix in ntkref/kernels/__init__.py: no error raised',
    'kernels.arora_ntk|depth|0': 'pending fix in ntkref/kernels/_fc.py: no error raised',
    'kernels.chen_ntk|depth|0': 'pending fix in ntkref/kernels/_fc.py: no error raised',
    'kernels.cntk|W_std|0.0': 'pending fix in ntkref/kernels/_cntk.py: no error raised',
    'kernels.fc_diagonal|x|-inf': "pending fix in ntkref/kernels/_fc.py: InvalidParameterError does not name ['x']: The 'x1' parameter of fc_diagonal contains NaN or infinite values.",
    'kernels.fc_diagonal|x|complex': "pending fix in ntkref/kernels/_fc.py: InvalidParameterError does not name ['x']: The 'x1' parameter must be real; got dtype complex128.",
    'kernels.fc_diagonal|x|inf': "pending fix in ntkref/kernels/_fc.py: InvalidParameterError does not name ['x']: The 'x1' parameter of fc_diagonal contains NaN or infinite values.",
    'kernels.fc_diagonal|x|nan': "pending fix in ntkref/kernels/_fc.py: InvalidParameterError does not name ['x']: The 'x1' parameter of fc_diagonal contains NaN or infinite values.",
    'kernels.fc_diagonal|x|ndim': "pending fix in ntkref/kernels/_fc.py: InvalidParameterError does not name ['x']: The 'x1' parameter of fc_diagonal must have 2 dimension(s); got sha",
    'kernels.fc_diagonal|x|str': "pending fix in ntkref/kernels/_fc.py: InvalidParameterError does not name ['x']: The 'x1' parameter of fc_diagonal must be an array of real numbers;",
}

OTHER = {
    'kernels.cntk|x1|namespace': 'pending fix in ntkref/kernels.py (non-NumPy backends): Arrays are not equal',
}
