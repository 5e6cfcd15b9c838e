"""Pending bad-input cases: certify (see the package docstring)."""

NUMPY = {
    'certify.dot_norm_ranges|x0|-inf': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of dot_norm_ranges contains NaN or infinite",
    'certify.dot_norm_ranges|x0|1e300': 'pending fix in ntkref/certify.py: silent non-finite result: array([[-inf, -inf, -inf, -inf, -inf, -inf],',
    'certify.dot_norm_ranges|x0|complex': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter must be real; got dtype complex128.",
    'certify.dot_norm_ranges|x0|inf': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of dot_norm_ranges contains NaN or infinite",
    'certify.dot_norm_ranges|x0|nan': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of dot_norm_ranges contains NaN or infinite",
    'certify.dot_norm_ranges|x0|ndim': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of dot_norm_ranges must have 2 dimension(s)",
    'certify.dot_norm_ranges|x0|str': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of dot_norm_ranges must be an array of real",
    'certify.dot_norm_ranges|x_train|1e300': 'pending fix in ntkref/certify.py: silent non-finite result: array([[-inf, -inf, -inf, -inf, -inf, -inf],',
    'certify.ntk_interval|x0|-inf': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of ntk_interval contains NaN or infinite va",
    'certify.ntk_interval|x0|1e300': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' points of ntk_interval must lie inside 'domain'.",
    'certify.ntk_interval|x0|complex': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter must be real; got dtype complex128.",
    'certify.ntk_interval|x0|inf': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of ntk_interval contains NaN or infinite va",
    'certify.ntk_interval|x0|nan': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of ntk_interval contains NaN or infinite va",
    'certify.ntk_interval|x0|ndim': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of ntk_interval must have 2 dimension(s); g",
    'certify.ntk_interval|x0|str': "pending fix in ntkref/certify.py: InvalidParameterError does not name ['x0']: The 'x_test' parameter of ntk_interval must be an array of real nu",
    'certify.ntk_interval|x_train|1e300': 'pending fix in ntkref/certify.py: silent non-finite result: array([[nan, nan, nan, nan, nan, nan],',
    'certify.output_bounds|x_test|1e300': 'pending fix in ntkref/certify.py: silent non-finite result: array([nan, nan, nan, nan])',
    'certify.output_bounds|x_train|1e300': 'pending fix in ntkref/certify.py: silent non-finite result: array([nan, nan, nan, nan])',
}

OTHER = {}
