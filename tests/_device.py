"""Helpers of the device-placement tests: inputs on array_api_strict's ``Device("device1")``.

That device refuses implicit conversion to NumPy exactly like a CuPy array, so a public function that
creates an array on the default device, or goes through NumPy behind the caller's back, fails there.
"""
import dataclasses

import pytest


def device1():
    """The strict namespace and its second device (skips the test where array_api_strict is missing)."""
    strict = pytest.importorskip("array_api_strict")
    return strict, strict.Device("device1")


def arrays_in(obj):
    """Every array inside a result, as a list: tuples, lists, dicts and dataclasses are walked; other values
    (None, Python numbers, strings) hold none."""
    import array_api_compat

    if array_api_compat.is_array_api_obj(obj):
        return [obj]
    if isinstance(obj, dict):
        return [a for v in obj.values() for a in arrays_in(v)]
    if isinstance(obj, (list, tuple)):
        return [a for v in obj for a in arrays_in(v)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [a for f in dataclasses.fields(obj) for a in arrays_in(getattr(obj, f.name))]
    return []


def assert_on_device(result, strict, dev):
    """The result holds at least one array, and every array in it is a strict array on ``dev``."""
    import array_api_compat

    arrays = arrays_in(result)
    assert arrays, type(result)
    for a in arrays:
        assert array_api_compat.array_namespace(a) is strict, type(a)
        assert array_api_compat.device(a) == dev, array_api_compat.device(a)
