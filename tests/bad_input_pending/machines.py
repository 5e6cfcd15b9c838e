"""Pending bad-input cases: machines (see the package docstring)."""

NUMPY = {
    'machines.dual_objective|alpha|1e300': 'pending fix in ntkref/machines.py: silent non-finite result: array(-inf)',
    'machines.duality_gap|alpha|1e300': 'pending fix in ntkref/machines.py: silent non-finite result: array(inf)',
    'machines.fit[squared]|lam|0.0': 'pending fix in ntkref/machines.py: no error raised',
    'machines.fit[squared]|max_iter|-1': 'pending fix in ntkref/machines.py: no error raised',
    'machines.fit[squared]|max_iter|0': 'pending fix in ntkref/machines.py: no error raised',
    'machines.fit[squared]|max_iter|nan': 'pending fix in ntkref/machines.py: no error raised',
    'machines.objective|K|1e300': 'pending fix in ntkref/machines.py: silent non-finite result: array(inf)',
    'machines.objective|alpha|1e300': 'pending fix in ntkref/machines.py: silent non-finite result: array(nan)',
    'machines.objective|lam|0.0': 'pending fix in ntkref/machines.py: no error raised',
    'machines.objective|y|1e300': 'pending fix in ntkref/machines.py: silent non-finite result: array(inf)',
    'machines.rkhs_norm|alpha|1e300': 'pending fix in ntkref/machines.py: silent non-finite result: array(inf)',
}

OTHER = {
    'machines.KernelMachine.predict|K_test_train|1e-300': "pending fix in ntkref/machines.py (non-NumPy backends): ValueError does not name ['K_test_train']: Arrays from two different devices (array_api_strict.Device('device1",
    'machines.KernelMachine.predict|K_test_train|1e300': "pending fix in ntkref/machines.py (non-NumPy backends): ValueError does not name ['K_test_train']: Arrays from two different devices (array_api_strict.Device('device1",
    'machines.KernelMachine.predict|K_test_train|empty': "pending fix in ntkref/machines.py (non-NumPy backends): ValueError does not name ['K_test_train']: Arrays from two different devices (array_api_strict.Device('device1",
    'machines.KernelMachine.predict|K_test_train|namespace': 'pending fix in ntkref/machines.py (non-NumPy backends): ((\'ok\', [array([0.48260537, 0.25538918])]), (\'error\', <class \'ValueError\'>, "Arrays from two different devices',
    'machines.KernelMachine.predict|valid|valid': "pending fix in ntkref/machines.py (non-NumPy backends): ValueError: Arrays from two different devices (array_api_strict.Device('device1') and array_api_strict.Device(",
}
