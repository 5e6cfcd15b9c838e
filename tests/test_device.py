"""Python lists and scalars given next to device arrays land on those arrays' device.

A list next to a CuPy array (or an array_api_strict array on ``device1``, the CPU stand-in for a GPU) must
become an array on that device, not on the default one: otherwise the call fails with a device mix, or, with
``NTKREF_DEVICE`` set, asks NumPy for a device it does not have.  Each case runs the call with the list and
with the same values as a device array and requires identical results on the inputs' device.
"""
import numpy as np
import pytest

from ntkref import bounds, dynamics, machines, regularizers

strict = pytest.importorskip("array_api_strict")
import array_api_compat  # noqa: E402

DEV = strict.Device("device1")


def _problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 3))
    K = x @ x.T + 0.1 * np.eye(6)
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    return K, y


def _calls(K, y):
    """(name, function of (K array, y-like)) pairs: the y-like is a list or an array."""
    return [
        ("machines.fit squared", lambda Ka, ya: machines.fit(Ka, ya, "squared", 0.1)),
        ("machines.fit hinge", lambda Ka, ya: machines.fit(Ka, ya, "hinge", 0.1)),
        ("machines.predict", lambda Ka, ya: machines.predict(ya, Ka)),
        ("machines.objective", lambda Ka, ya: machines.objective(ya, Ka, ya, "squared", 0.1)),
        ("dynamics.gradient_flow squared",
         lambda Ka, ya: dynamics.gradient_flow(Ka, ya, "squared", 0.1, [0.0, 0.5, 1.0]).g_train),
        ("dynamics.subgradient_descent",
         lambda Ka, ya: dynamics.subgradient_descent(Ka, ya, "squared", 0.1, 0.05, 5).g_train),
        ("regularizers.regularized_flow", lambda Ka, ya: regularizers.regularized_flow(Ka, ya, 0.1, [0.0, 2.0]).train),
        ("bounds.rademacher_bound",
         lambda Ka, ya: bounds.rademacher_bound(Ka, ya, 0.1, delta=0.01, c=1.0, rho=1.0)),
    ]


def _read(v):
    if isinstance(v, float):
        return np.array(v)
    assert array_api_compat.device(v) == DEV, array_api_compat.device(v)
    return np.asarray(strict.asarray(v, device=strict.Device("CPU_DEVICE")))


@pytest.mark.parametrize("case", range(len(_calls(*_problem()))), ids=[c[0] for c in _calls(*_problem())])
def test_lists_take_the_device_of_the_other_inputs(case, monkeypatch):
    monkeypatch.delenv("NTKREF_DEVICE", raising=False)
    K, y = _problem()
    name, fn = _calls(K, y)[case]
    Kd = strict.asarray(K, device=DEV)
    yd = strict.asarray(y, device=DEV)
    with_list = fn(Kd, [float(v) for v in y])
    with_array = fn(Kd, yd)
    np.testing.assert_array_equal(_read(with_list), _read(with_array))


@pytest.mark.parametrize("case", range(len(_calls(*_problem()))), ids=[c[0] for c in _calls(*_problem())])
def test_numpy_inputs_with_lists_ignore_ntkref_device(case, monkeypatch):
    """NTKREF_DEVICE names a device of the *default* namespace; NumPy inputs with a list stay NumPy."""
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    K, y = _problem()
    name, fn = _calls(K, y)[case]
    got = fn(K, [float(v) for v in y])
    ref = fn(K, y)
    assert isinstance(got, (float, np.ndarray, np.floating)), type(got)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


def test_an_array_of_another_library_or_device_is_named_as_such():
    # what a CuPy array next to NumPy ones gives (no implicit conversion): the message names the parameter and
    # says why, instead of the library's bare "Implicit conversion ... not allowed"
    from ntkref._lib.validation import InvalidParameterError, check_array

    with pytest.raises(InvalidParameterError, match=r"'y' parameter .*different array libraries or devices"):
        check_array(strict.asarray(np.ones(3), device=DEV), "y", xp=np)
