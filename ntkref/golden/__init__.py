"""Golden vectors: small, versioned reference inputs and outputs for implementations in any language.

The files (``manifest.json`` and ``golden.npz`` in this folder, described in
``README.md``) are produced by ``validation/make_golden.py`` from an
independent high-precision mpmath evaluation of each kernel's defining formula
— not by ntkref — and ``tests/test_golden.py`` checks ntkref against them.

>>> from ntkref import golden
>>> m = golden.manifest()
>>> m["version"]
1
>>> case = golden.case("eq63")
>>> golden.inputs(case["inputs"]).shape
(7, 4)
"""
from __future__ import annotations

import json

from .._lib.validation import InvalidParameterError
from ..data import _package_file

__all__ = ["manifest", "cases", "case", "inputs", "values", "path"]


class _UnknownNameError(KeyError, InvalidParameterError):
    """An unknown case, input set or output name: a KeyError that is also an InvalidParameterError."""

    def __str__(self):  # the message, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""


def _unknown(param, caller, got, known):
    return _UnknownNameError(f"The {param!r} parameter of ntkref.golden.{caller} must be one of "
                             f"{', '.join(map(repr, known))}. Got {got!r} instead.")


def path(name="manifest.json"):
    """A traversable path to one of the golden files (``manifest.json``, ``golden.npz``, ``README.md``); an error
    naming ``name`` for any other name."""
    return _package_file(__name__, name, "ntkref.golden.path")


def manifest():
    """The parsed ``manifest.json`` (version, conventions, inputs, cases with their values)."""
    return json.loads(path("manifest.json").read_text(encoding="utf-8"))


def cases():
    """The list of cases (dicts with ``id``, ``family``, ``params``, ``inputs``, ``function``, ``values``)."""
    return manifest()["cases"]


def case(case_id):
    """The case called ``case_id``."""
    all_cases = cases()
    for c in all_cases:
        if c["id"] == case_id:
            return c
    raise _unknown("case_id", "case", case_id, [c["id"] for c in all_cases])


def inputs(name):
    """The input set ``name`` as a float64 NumPy array ((n, d); ``"images"``: (n, C, H, W))."""
    import numpy as np

    sets = manifest()["inputs"]
    if not isinstance(name, str) or name not in sets:
        raise _unknown("name", "inputs", name, sorted(sets))
    return np.array(sets[name]["values"], dtype=np.float64)


def values(case_id, output="ntk"):
    """The reference matrix ``output`` (``"ntk"`` or ``"nngp"``) of a case, float64 (n, n)."""
    import numpy as np

    outputs = case(case_id)["values"]
    if not isinstance(output, str) or output not in outputs:
        raise _unknown("output", "values", output, sorted(outputs))
    return np.array(outputs[output], dtype=np.float64)
