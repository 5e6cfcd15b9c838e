"""Pending bad-input cases: losses (see the package docstring)."""

NUMPY = {
    'losses.Loss[squared].value|y|1e300': "pending: (y - z)**2 overflows to inf; Loss.value can refuse it (as it does for squared_hinge/epsilon_insensitive) once ntkref/machines.py catches that error and re-raises its own message naming 'K'/'y'/'lam' (tests/test_machines.py::test_solve_refuses_an_overflowing_objective expects it)",
    'losses.Loss[squared].value|z|1e300': "pending: as losses.Loss[squared].value|y|1e300",
}

OTHER = {}
