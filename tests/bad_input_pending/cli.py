"""Pending bad-input cases: cli (see the package docstring)."""

NUMPY = {
    'cli.kernel_error|candidate_K|-inf': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|candidate_K|complex': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|candidate_K|empty': "pending fix in ntkref/cli.py: ValueError does not name ['candidate_K', 'reference_K', 'reference_diag1']: operands could not be broadcast to",
    'cli.kernel_error|candidate_K|inf': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|candidate_K|nan': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|candidate_K|ndim': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|candidate_K|str': "pending fix in ntkref/cli.py: ValueError does not name ['candidate_K']: could not convert string to float: np.str_('a')",
    'cli.kernel_error|reference_K|-inf': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_K|complex': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_K|empty': "pending fix in ntkref/cli.py: ValueError does not name ['candidate_K', 'reference_K', 'reference_diag1']: operands could not be broadcast to",
    'cli.kernel_error|reference_K|inf': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_K|nan': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_K|ndim': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_K|str': "pending fix in ntkref/cli.py: ValueError does not name ['reference_K']: could not convert string to float: np.str_('a')",
    'cli.kernel_error|reference_diag1|-inf': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_diag1|complex': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_diag1|empty': "pending fix in ntkref/cli.py: ValueError does not name ['candidate_K', 'reference_K', 'reference_diag1']: operands could not be broadcast to",
    'cli.kernel_error|reference_diag1|inf': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_diag1|nan': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_diag1|ndim': 'pending fix in ntkref/cli.py: no error raised',
    'cli.kernel_error|reference_diag1|str': "pending fix in ntkref/cli.py: ValueError does not name ['reference_diag1']: could not convert string to float: np.str_('a')",
}

OTHER = {
    'cli.kernel_error|candidate_K|1e-300': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
    'cli.kernel_error|candidate_K|1e300': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
    'cli.kernel_error|candidate_K|namespace': 'pending fix in ntkref/cli.py (non-NumPy backends): (\'error\', <class \'RuntimeError\'>, "Can\'t convert array on the \'array_api_strict.Device(\'device1\')\' device to a',
    'cli.kernel_error|reference_K|1e-300': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
    'cli.kernel_error|reference_K|1e300': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
    'cli.kernel_error|reference_K|namespace': 'pending fix in ntkref/cli.py (non-NumPy backends): (\'error\', <class \'RuntimeError\'>, "Can\'t convert array on the \'array_api_strict.Device(\'device1\')\' device to a',
    'cli.kernel_error|reference_diag1|1e-300': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
    'cli.kernel_error|reference_diag1|1e300': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
    'cli.kernel_error|reference_diag1|namespace': 'pending fix in ntkref/cli.py (non-NumPy backends): (\'error\', <class \'RuntimeError\'>, "Can\'t convert array on the \'array_api_strict.Device(\'device1\')\' device to a',
    'cli.kernel_error|valid|valid': "pending fix in ntkref/cli.py (non-NumPy backends): RuntimeError: Can't convert array on the 'array_api_strict.Device('device1')' device to a NumPy array.",
}
