"""Pending bad-input cases: testing (see the package docstring)."""

NUMPY = {
    'testing.check_certificate|candidate|bogus': "pending fix in ntkref/testing.py: OracleMismatch: check_certificate(bogus, norm='linf')",
    'testing.check_certificate|max_examples|0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_certificate|n_attack|-1': "pending fix in ntkref/testing.py: ValueError does not name ['n_attack']: negative dimensions are not allowed",
    'testing.check_certificate|n_attack|0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_certificate|n_attack|nan': "pending fix in ntkref/testing.py: TypeError does not name ['n_attack']: 'float' object cannot be interpreted as an integer",
    'testing.check_dynamics|candidate|bogus': "pending fix in ntkref/testing.py: OracleMismatch: check_dynamics(bogus, kind='flow', loss='squared', lam=0.1, reduction='sum', tol=1e-06)",
    'testing.check_dynamics|lr|-1.0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|lr|-inf': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|lr|0.0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|lr|inf': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|lr|nan': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|lr|str': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|max_examples|0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|steps|-1': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_dynamics|steps|nan': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_fit|candidate|bogus': "pending fix in ntkref/testing.py: OracleMismatch: check_fit(bogus, loss='hinge', lam=0.1, reduction='sum', objective_tol=1e-08)",
    'testing.check_fit|max_examples|0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_kernel|diag_tol|inf': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_kernel|dtype|bogus': "pending fix in ntkref/testing.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
    'testing.check_kernel|max_examples|0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.check_kernel|offdiag_tol|inf': 'pending fix in ntkref/testing.py: no error raised',
    'testing.generic_kernel_inputs|dtype|bogus': "pending fix in ntkref/testing.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
    'testing.hard_inputs|dtype|bogus': "pending fix in ntkref/testing.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
    'testing.kernel_inputs|dtype|bogus': "pending fix in ntkref/testing.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
    'testing.labels|bound|-1.0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.labels|bound|-inf': 'pending fix in ntkref/testing.py: no error raised',
    'testing.labels|bound|0.0': 'pending fix in ntkref/testing.py: no error raised',
    'testing.labels|bound|inf': 'pending fix in ntkref/testing.py: no error raised',
    'testing.labels|bound|nan': 'pending fix in ntkref/testing.py: no error raised',
    'testing.labels|bound|str': 'pending fix in ntkref/testing.py: no error raised',
    'testing.rows|dtype|bogus': "pending fix in ntkref/testing.py: TypeError does not name ['dtype']: data type 'bogus' not understood",
}

OTHER = {
}
