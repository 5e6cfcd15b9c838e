"""Shared fixtures: the array namespace under test and conversion helpers.

Tests build inputs with NumPy (seeded) and move them to ``xp``, the namespace
selected by ``NTKREF_BACKEND`` (NumPy by default; ``array_api_strict`` on its
``device1`` in CI's second run, the CPU stand-in for a GPU; ``cupy`` on a GPU
machine), on the device ``NTKREF_DEVICE`` names.  Results come back with
``tonp``, never ``np.asarray`` (a CuPy array, or a strict array on device1,
refuses it).  ``xdev`` is the device inputs live on; ``on_device`` asserts a
result is an array of ``xp`` on it.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import array_api_compat

from ntkref._lib.backend import default_device, default_namespace, to_numpy

settings.register_profile(
    "deterministic",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("fuzz", deadline=None, max_examples=500, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("NTKREF_HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(scope="session")
def xp():
    return default_namespace()


@pytest.fixture(scope="session")
def xdev(xp):
    dev = default_device()
    return dev if dev is not None else array_api_compat.device(xp.zeros(0))


@pytest.fixture(scope="session")
def asxp(xp, xdev):
    def convert(a, dtype=None):
        a = np.asarray(a)
        if dtype is None and a.dtype.kind in "fc":
            dtype = xp.float64 if a.dtype == np.float64 else xp.float32
        return xp.asarray(a, dtype=dtype, device=xdev) if dtype is not None else xp.asarray(a, device=xdev)

    return convert


@pytest.fixture(scope="session")
def on_device(xp, xdev):
    """Assert that every array given is an array of ``xp`` on the inputs' device (``None`` is skipped)."""

    def check(*arrays):
        for a in arrays:
            if a is None:
                continue
            assert array_api_compat.array_namespace(a) is array_api_compat.array_namespace(xp.zeros(0)), type(a)
            assert array_api_compat.device(a) == xdev, (array_api_compat.device(a), xdev)

    return check


@pytest.fixture(scope="session")
def tonp():
    return to_numpy
