"""Shared fixtures: the array namespace under test and conversion helpers.

Tests build inputs with NumPy (seeded) and move them to ``xp``, the namespace
selected by ``NTKREF_BACKEND`` (NumPy by default; ``array_api_strict`` in CI's
second run; ``cupy`` on a GPU machine).  Results come back with ``to_numpy``.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from ntkref._backend import default_namespace, to_numpy

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
def asxp(xp):
    def convert(a, dtype=None):
        a = np.asarray(a)
        if dtype is None and a.dtype.kind in "fc":
            dtype = xp.float64 if a.dtype == np.float64 else xp.float32
        return xp.asarray(a, dtype=dtype) if dtype is not None else xp.asarray(a)

    return convert


@pytest.fixture(scope="session")
def tonp():
    return to_numpy
