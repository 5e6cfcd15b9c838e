"""Pending cases of the bad-input catalogue (tests/test_bad_input.py), one module per library area.

Each module holds ``NUMPY`` (strict xfails under every backend's run of the NumPy catalogue) and ``OTHER``
(strict xfails found only on non-NumPy backends such as array_api_strict's device1).  A case listed here must
keep failing until its fix lands, and is then deleted from its module (a listed case that passes fails the
test).  Keys are "entry|parameter|perturbation"; values say which file needs the fix and what was seen.
"""
import importlib
import pkgutil


def load():
    numpy_cases, other_cases = {}, {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        numpy_cases.update(getattr(mod, "NUMPY", {}))
        other_cases.update(getattr(mod, "OTHER", {}))
    return numpy_cases, other_cases
