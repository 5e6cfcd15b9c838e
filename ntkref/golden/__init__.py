"""Golden vectors: small, versioned reference inputs and outputs for implementations in any language.

The files (``manifest.json`` and ``golden.npz`` in this folder, described in
``README.md``) are produced by ``validation/make_golden.py`` from an
independent high-precision mpmath evaluation of each kernel's defining formula
— not by ntkref — and ``tests/test_golden.py`` checks ntkref against them.
Check an implementation entrywise with |K − K_golden| ≤ tol·√K(x,x)·√K(x′,x′)
(the product of the square roots: K(x,x)·K(x′,x′) underflows to 0 on the
``hard`` set's row of norm 1e-100).

Pinned regression tests of *your own* inputs: :func:`record` writes the
reference ``kernels.fc`` values of your inputs to a versioned, checksummed JSON
file (atomically); :func:`replay` checks your implementation against it in a
test, in the same measure (:mod:`ntkref.golden._record`).

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
from ._record import RECORD_FORMAT, RECORD_VERSION, ReplayMismatch, ReplayResult, load_record, record, replay

__all__ = ["manifest", "cases", "case", "inputs", "values", "path", "record", "replay", "load_record",
           "ReplayResult", "ReplayMismatch", "RECORD_FORMAT", "RECORD_VERSION"]


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


from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
